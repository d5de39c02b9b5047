import EarshotSystem
import EarshotWire
import Foundation

/// The process-wide connection the Apple-shaped API uses (`AssetInventory`, the modules' static
/// members). Connects lazily; reconnects after the daemon restarts.
public actor EarshotService {
    /// The shared instance.
    public static let shared = EarshotService()

    private var appID: String = EarshotService.defaultAppID
    private var socket: String?
    private var startsUserDaemon = true
    private var connection: DaemonConnection?
    private let cache = QuotaCache()

    /// Sets the app id reservations are kept under (default: `org.earshot.app.<executable>`),
    /// optionally the daemon socket, and whether a per-user daemon is started when none answers.
    /// Takes effect at the next connection.
    public func configure(appID: String, socket: String? = nil, startsUserDaemon: Bool = true) async {
        self.appID = appID
        self.socket = socket
        self.startsUserDaemon = startsUserDaemon
        await connection?.close()
        connection = nil
    }

    /// Uses `connection` (already introduced to the daemon as `appID`) from now on, so a tool that
    /// connected itself needs no second connection and hello; after the daemon goes away it
    /// reconnects to the same socket.
    public func adopt(_ connection: DaemonConnection, appID: String) async {
        await configure(appID: appID, socket: connection.socketPath)
        await use(connection)
    }

    /// Makes `fresh` the live connection and notes the quota its welcome announced.
    private func use(_ fresh: DaemonConnection) async {
        connection = fresh
        if let quota = await fresh.welcome?.maxReservedLocales { cache.set(quota) }
    }

    /// The app id in use.
    public var currentAppID: String { appID }

    static var defaultAppID: String {
        let name = (CommandLine.arguments.first.map { ($0 as NSString).lastPathComponent } ?? "app")
            .unicodeScalars.map { CharacterSet.alphanumerics.contains($0) || "-_".unicodeScalars.contains($0) ? Character($0) : "-" }
        return "org.earshot.app." + String(name).prefix(200)
    }

    /// The live connection, made on first use. When no daemon answers, starts the per-user daemon
    /// (`earshotd --user`, found beside the running executable or on `PATH`) as `earshot` does;
    /// throws ``EarshotError/noDaemon(tried:)`` saying so when that fails too.
    public func connection() async throws -> DaemonConnection {
        if let connection, await connection.isOpen { return connection }
        let fresh: DaemonConnection
        do {
            fresh = try await DaemonConnection.connect(socket: socket, appID: appID)
        } catch EarshotError.noDaemon(let tried) {
            guard startsUserDaemon else { throw EarshotError.noDaemon(tried: tried) }
            guard let daemon = UserDaemon.locate() else {
                throw EarshotError.noDaemon(tried: tried + [("earshotd", "not found beside \(ProcessFacts.executableDirectory) or on PATH, so no user daemon could be started")])
            }
            let path = try await UserDaemon.start(daemon: daemon, socket: socket)
            fresh = try await DaemonConnection.connect(socket: path, appID: appID)
        }
        await use(fresh)
        return fresh
    }

    /// Sends `event` (with `payload`) and returns the typed reply, reconnecting once if the
    /// daemon went away.
    func request<Reply: WireEvent>(_ event: some WireEvent, payload: [UInt8] = [], expecting: Reply.Type,
                                   progress: (@Sendable (Frame) -> Void)? = nil) async throws -> Reply {
        do {
            return try await connection().request(event, payload: payload, expecting: Reply.self, progress: progress)
        } catch EarshotError.disconnected {
            connection = nil
            return try await connection().request(event, payload: payload, expecting: Reply.self, progress: progress)
        }
    }

    /// The last quota the daemon announced (synchronous, as Apple's `maximumReservedLocales`).
    nonisolated var cachedQuota: Int? { cache.value }

    func rememberQuota(_ value: Int) { cache.set(value) }

    /// The answer of a query whose Apple signature cannot throw: `fallback` when it fails, with
    /// the reason on standard error (never a silent "unsupported").
    static func answer<T: Sendable>(_ api: String, fallback: T, _ query: () async throws -> T) async -> T {
        do {
            return try await query()
        } catch {
            FileHandle.standardError.write(Data("Earshot: \(api): \(error)\n".utf8))
            return fallback
        }
    }
}

/// A lock-protected value readable without awaiting.
final class QuotaCache: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Int?
    var value: Int? { lock.withLock { stored } }
    func set(_ value: Int) { lock.withLock { stored = value } }
}
