import EarshotAssets
import EarshotWire
import Foundation

/// The asset inventory's requests: decode, authorize, call ``AssetService``, encode the reply.
struct AssetHarness: Sendable {
    let assets: AssetService

    /// Request types that may run long (downloads): served concurrently with the connection's
    /// other requests, with progress events in between.
    static let longRunning: Set<String> = [InstallRequest.eventType, UpdateRequest.eventType, CatalogRequest.eventType]

    /// Handles `frame` if it is an asset request; `nil` if it is not one.
    func handle(_ frame: Frame, context: RequestContext, progress: @escaping @Sendable (Frame) -> Void) async throws -> Frame? {
        switch frame.type {
        case ModuleStatusRequest.eventType:
            let request = try frame.decode(ModuleStatusRequest.self)
            let (status, each) = try await assets.status(of: request.modules)
            return try Frame(ModuleStatusReply(id: request.id, status: status, modules: each))
        case LocalesRequest.eventType:
            let request = try frame.decode(LocalesRequest.self)
            let locales: [String]
            if let locale = request.equivalentTo {
                locales = await assets.equivalentLocale(locale, kind: request.kind).map { [$0] } ?? []
            } else {
                locales = try await assets.locales(kind: request.kind, installedOnly: request.installed)
            }
            return try Frame(LocalesReply(id: request.id, locales: locales))
        case ReserveRequest.eventType:
            let request = try frame.decode(ReserveRequest.self)
            let created = try await assets.reserve(request.locale, for: try client(context))
            return try Frame(ReserveReply(id: request.id, created: created))
        case ReleaseRequest.eventType:
            let request = try frame.decode(ReleaseRequest.self)
            var whose = try client(context)
            if request.uid != nil || request.appId != nil {
                let other = ClientIdentity(uid: request.uid ?? context.peer.uid, appID: request.appId ?? whose.appID)
                if other != whose { try requireAdmin(context, "release another client's reservation") }
                whose = other
            }
            return try Frame(ReleaseReply(id: request.id, released: try await assets.release(request.locale, for: whose)))
        case ReservationsRequest.eventType:
            let request = try frame.decode(ReservationsRequest.self)
            if request.all {
                try requireAdmin(context, "list every client's reservations")
                let quota = await assets.maximumReservedLocales(appID: context.appID ?? "")
                return try Frame(ReservationsReply(id: request.id, reservations: try await assets.reservations(of: nil), maximum: quota))
            }
            let me = try client(context)
            let list = try await assets.reservations(of: me)
            return try Frame(ReservationsReply(id: request.id, reservations: list, maximum: await assets.maximumReservedLocales(appID: me.appID)))
        case InstallRequest.eventType:
            let request = try frame.decode(InstallRequest.self)
            let id = request.id
            let outcome = try await assets.install(request.modules, for: try client(context)) { event in
                var event = event
                event.id = id
                if let frame = try? Frame(event) { progress(frame) }
            }
            return try Frame(InstallReply(id: id, nothingToDo: outcome.nothingToDo, installed: outcome.installed, reserved: outcome.reserved))
        case AssetsRequest.eventType:
            let request = try frame.decode(AssetsRequest.self)
            try requireAdmin(context, "list installed assets")
            return try Frame(AssetsReply(id: request.id, assets: try await assets.installedAssetInfo(), jobs: await assets.jobInfo()))
        case CatalogRequest.eventType:
            let request = try frame.decode(CatalogRequest.self)
            var refreshed: [CatalogRefreshResult] = []
            if request.refresh {
                try requireAdmin(context, "refresh the catalog")
                refreshed = await assets.refreshCatalogs()
            }
            let summary = await assets.catalogSummary()
            let installedAssets = try await assets.installedAssets()
            let installed = Set(installedAssets.map(\.key))
            let currentVersions = Dictionary(installedAssets.filter(\.current).map { ($0.entry.id, $0.entry.version) }, uniquingKeysWith: max)
            let sources = summary.sources.map { source in
                let result = refreshed.first { $0.url == source.url }
                return CatalogSourceInfo(url: source.url, version: source.version, keyId: source.keyID, outcome: result?.outcome.rawValue, message: result?.message)
            }
            let list = summary.assets.map {
                CatalogAssetInfo(id: $0.id, version: $0.version, kind: $0.kind, engine: $0.engine, locales: $0.locales, size: $0.size, license: $0.license, installed: installed.contains("\($0.id)@\($0.version)"),
                                 installedVersion: currentVersions[$0.id])
            }
            return try Frame(CatalogReply(id: request.id, sources: sources, assets: list))
        case CancelInstallRequest.eventType:
            let request = try frame.decode(CancelInstallRequest.self)
            try requireAdmin(context, "cancel installs")
            return try Frame(CancelInstallReply(id: request.id, cancelled: await assets.cancelInstall(request.asset)))
        case RollbackRequest.eventType:
            let request = try frame.decode(RollbackRequest.self)
            try requireAdmin(context, "roll back assets")
            let (from, to) = try await assets.rollback(request.asset, requestedBy: "uid \(context.peer.uid)")
            return try Frame(RollbackReply(id: request.id, asset: request.asset, fromVersion: from, toVersion: to))
        case GCRequest.eventType:
            let request = try frame.decode(GCRequest.self)
            try requireAdmin(context, "run garbage collection")
            let report = try await assets.collectGarbage(dryRun: request.dryRun)
            return try Frame(GCReply(id: request.id, dryRun: report.dryRun, removed: report.removed, freedBytes: report.freedBytes, expiredReservations: report.expiredReservations))
        case UpdateRequest.eventType:
            let request = try frame.decode(UpdateRequest.self)
            try requireAdmin(context, "update assets")
            let report = await assets.update(dryRun: request.dryRun, requestedBy: "uid \(context.peer.uid)")
            let sources = report.catalogs.map { CatalogSourceInfo(url: $0.url, version: $0.version, keyId: nil, outcome: $0.outcome.rawValue, message: $0.message) }
            return try Frame(UpdateReply(id: request.id, catalogs: sources, updated: report.updated, failed: report.failed, deferred: report.deferred,
                                         changed: report.changed, dryRun: report.dryRun, planned: report.planned))
        default:
            return nil
        }
    }

    /// The caller's identity for reservations: its uid and the app id from `earshot.hello`.
    func client(_ context: RequestContext) throws -> ClientIdentity {
        guard let appID = context.appID else {
            throw WireError(.badRequest, "send earshot.hello with an app_id first: reservations belong to an app")
        }
        return ClientIdentity(uid: context.peer.uid, appID: appID)
    }

    func requireAdmin(_ context: RequestContext, _ what: String) throws {
        guard context.admin else { throw WireError(.permissionDenied, "only admins may \(what) (root or members of the admin group)") }
    }
}
