import EarshotAssets
import EarshotSpeech
import EarshotSystem

/// A listener whose connections ``ConnectionServer`` serves: the main Unix socket, or Wyoming over
/// TCP. Shutting down it stops accepting and closes idle connections; those whose sessions are
/// being finished stay open for their results until the coordinator has no session left.
struct FrameFrontService: DaemonService {
    let name: String
    let listener: Listener
    let accepted: AsyncStream<AcceptedConnection>
    let server: ConnectionServer
    /// The app every peer of this front acts as (Wyoming over TCP), nil when peers say.
    var networkAppID: String?
    let registry: ConnectionRegistry
    let coordinator: AnalysisCoordinator
    private let latch = Latch()

    init(name: String, listener: Listener, accepted: AsyncStream<AcceptedConnection>, server: ConnectionServer,
         networkAppID: String? = nil, registry: ConnectionRegistry, coordinator: AnalysisCoordinator) {
        self.name = name
        self.listener = listener
        self.accepted = accepted
        self.server = server
        self.networkAppID = networkAppID
        self.registry = registry
        self.coordinator = coordinator
    }

    /// Serves until the listener stopped and every connection closed.
    func run() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await server.serve(accepted, networkAppID: networkAppID) }
            group.addTask {
                await latch.wait()
                guard !Task.isCancelled else { return }
                await coordinator.drained()
                await registry.closeIdle()
            }
            await group.next()
            if !latch.isOpen { group.cancelAll() } // the listener ended on its own: stop waiting
        }
    }

    func beginShutdown() async {
        listener.stop()
        latch.open()
        let sessions = coordinator.sessions
        await registry.beginShutdown(keepOpen: { sessions.hasSessions($0) })
    }

    func forceShutdown() async {
        await registry.closeAll()
    }
}

/// The HTTP front's listeners (they serve on their own threads): stopped once the coordinator
/// has finished the sessions of requests in flight.
struct HTTPFrontService: DaemonService {
    let listeners: [HTTPListener]
    let coordinator: AnalysisCoordinator
    private let latch = Latch()

    init(listeners: [HTTPListener], coordinator: AnalysisCoordinator) {
        self.listeners = listeners
        self.coordinator = coordinator
    }

    var name: String { "HTTP front" }

    func run() async {
        await latch.wait()
        if !Task.isCancelled { await coordinator.drained() }
        for listener in listeners { await listener.stop() }
    }

    /// The forced end comes through the coordinator: once it has cancelled every session,
    /// ``run()`` stops the listeners (cancelling what they still serve).
    func beginShutdown() async { latch.open() }
}

/// The `_wyoming._tcp` announcement, withdrawn at shutdown.
struct ZeroconfService: DaemonService {
    let announcer: ZeroconfAnnouncer
    private let latch = Latch()

    init(announcer: ZeroconfAnnouncer) { self.announcer = announcer }

    var name: String { "zeroconf announcement" }

    func run() async { await latch.wait() }

    func beginShutdown() async {
        announcer.stop()
        latch.open()
    }
}

/// A loop that runs until shutdown (the model evictor): cancelled when the shutdown begins.
struct BackgroundLoop: DaemonService {
    let name: String
    let body: @Sendable () async -> Void
    private let latch = Latch()

    init(name: String, body: @escaping @Sendable () async -> Void) {
        self.name = name
        self.body = body
    }

    func run() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await body() }
            group.addTask { await latch.wait() }
            await group.next()
            group.cancelAll()
        }
    }

    func beginShutdown() async { latch.open() }
}

extension AssetService: DaemonService {
    nonisolated var name: String { "asset service" }

    /// Cancels running install jobs (their partial downloads stay) and takes no more.
    func beginShutdown() async { await shutdown() }
}

extension AnalysisCoordinator: DaemonService {
    nonisolated var name: String { "session coordinator" }

    /// The deadline passed: sessions still running end now, unfinalized.
    func forceShutdown() async { await cancelAll() }
}
