import EarshotWire
import Foundation

/// Apple's `AssetInventory`: reserve locales, check and install the assets modules need. Assets
/// are shared by every app on the machine and managed by `earshotd`.
public enum AssetInventory {
    /// A module set's status. Ordered by declaration as in Apple's 27.0 SDK (`unsupported` <
    /// `downloading` < `supported` < `installed`; 26.5 ordered `supported` before `downloading`):
    /// prefer switching on the cases.
    public enum Status: Comparable, Hashable, Sendable {
        /// The modules will not work with their configuration.
        case unsupported
        /// The assets are being downloaded or installed.
        case downloading
        /// The modules can work, but their assets need to be downloaded.
        case supported
        /// Everything needed is installed.
        case installed

        init(_ status: AssetStatus) {
            self = switch status {
            case .unsupported: .unsupported
            case .downloading: .downloading
            case .supported: .supported
            case .installed: .installed
            }
        }
    }

    /// The status of `modules` together (unsupported if any is, then downloading, then supported).
    /// With no daemon answering, one is started (``EarshotService``); if that fails too, the reason
    /// is written to standard error and the status is `unsupported`.
    public static func status(forModules modules: [any SpeechModule]) async -> Status {
        let request = ModuleStatusRequest(modules: modules.map(\.moduleConfiguration))
        return await EarshotService.answer("AssetInventory.status(forModules:)", fallback: .unsupported) {
            Status(try await EarshotService.shared.request(request, expecting: ModuleStatusReply.self).status)
        }
    }

    /// `nil` when everything `modules` need is installed; otherwise a request whose
    /// ``AssetInstallationRequest/downloadAndInstall()`` reserves the locales (or throws
    /// `quotaExceeded`) and installs. Throws `unsupportedLocale` for modules nothing can serve.
    public static func assetInstallationRequest(supporting modules: [any SpeechModule]) async throws -> AssetInstallationRequest? {
        let configurations = modules.map(\.moduleConfiguration)
        let reply = try await EarshotService.shared.request(ModuleStatusRequest(modules: configurations), expecting: ModuleStatusReply.self)
        switch reply.status {
        case .installed: return nil
        case .unsupported:
            let index = reply.modules.firstIndex(of: .unsupported) ?? 0
            let locale = configurations[index].locale ?? "(none)"
            throw EarshotError.daemon(WireError(.unsupportedLocale, "no installable assets support \(configurations[index].kind.rawValue) for locale \(locale)"))
        case .supported, .downloading:
            return AssetInstallationRequest(modules: configurations)
        }
    }

    /// Reserves `locale` for this app; returns whether a new reservation was made.
    @discardableResult
    public static func reserve(locale: Locale) async throws -> Bool {
        try await EarshotService.shared.request(ReserveRequest(locale: locale.identifier), expecting: ReserveReply.self).created
    }

    /// Releases this app's reservation of `reservedLocale`; the system removes its assets later.
    @discardableResult
    public static func release(reservedLocale: Locale) async -> Bool {
        await EarshotService.answer("AssetInventory.release(reservedLocale:)", fallback: false) {
            try await EarshotService.shared.request(ReleaseRequest(locale: reservedLocale.identifier), expecting: ReleaseReply.self).released
        }
    }

    /// This app's reserved locales.
    public static var reservedLocales: [Locale] {
        get async {
            await EarshotService.answer("AssetInventory.reservedLocales", fallback: []) {
                let reply = try await EarshotService.shared.request(ReservationsRequest(), expecting: ReservationsReply.self)
                await EarshotService.shared.rememberQuota(reply.maximum)
                return reply.reservations.map { Locale(identifier: $0.locale) }
            }
        }
    }

    /// How many locales this app may reserve, as last announced by the daemon (0 before any
    /// AssetInventory call reached it).
    public static var maximumReservedLocales: Int {
        EarshotService.shared.cachedQuota ?? 0
    }
}

/// Apple's `AssetInstallationRequest`: installs what some modules need, with byte progress.
/// Requests for the same assets are consolidated by the daemon: calling
/// ``downloadAndInstall()`` several times, from several apps, downloads once.
public final class AssetInstallationRequest: NSObject, ProgressReporting, @unchecked Sendable {
    /// Bytes done of the total to download; finished when the install completes.
    public let progress: Progress
    let modules: [ModuleConfiguration]
    private let lock = NSLock()
    private var perAsset: [String: (done: Int64, total: Int64)] = [:]

    init(modules: [ModuleConfiguration]) {
        self.modules = modules
        progress = Progress(totalUnitCount: 0)
        super.init()
    }

    /// Downloads, verifies and installs; returns when the assets are ready.
    public func downloadAndInstall() async throws {
        _ = try await EarshotService.shared.request(InstallRequest(modules: modules), expecting: InstallReply.self) { [self] frame in
            guard let event = try? frame.decode(InstallProgress.self) else { return }
            update(event)
        }
        lock.withLock {
            if progress.totalUnitCount == 0 { progress.totalUnitCount = 1 }
            progress.completedUnitCount = progress.totalUnitCount
        }
    }

    private func update(_ event: InstallProgress) {
        lock.withLock {
            let done = event.phase == .downloading || event.phase == .queued ? event.bytesDone : event.bytesTotal
            perAsset["\(event.asset)@\(event.version)"] = (done, event.bytesTotal)
            progress.totalUnitCount = perAsset.values.reduce(0) { $0 + $1.total }
            progress.completedUnitCount = perAsset.values.reduce(0) { $0 + $1.done }
        }
    }
}
