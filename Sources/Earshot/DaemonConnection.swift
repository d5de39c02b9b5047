import EarshotSystem
import EarshotWire
import Foundation

/// One connection to `earshotd`: request/reply correlation by `id` over a ``FrameChannel``.
public actor DaemonConnection {
    private let channel: FrameChannel
    /// Requests sent and not yet answered; a reply that arrives before its waiter is parked here.
    private var awaiting: [String: Frame?] = [:]
    private var pending: [String: CheckedContinuation<Frame, any Error>] = [:]
    /// Intermediate events (install progress) for requests in flight, by request id.
    private var progressHandlers: [String: @Sendable (Frame) -> Void] = [:]
    /// Events of analysis sessions (results, volatile range, finished), by session id.
    private var sessionHandlers: [String: @Sendable (Frame) -> Void] = [:]
    private var nextID = 1
    private var reader: Task<Void, Never>?
    private var closed = false
    /// An `error` the daemon sent for the connection itself (no request id, no session): why it
    /// is closing it, e.g. no free connection slot.
    private var refusal: WireError?
    /// The socket path this connection uses.
    public nonisolated let socketPath: String
    /// What the daemon said in `earshot.welcome`.
    public private(set) var welcome: Welcome?

    private init(channel: FrameChannel, socketPath: String) {
        self.channel = channel
        self.socketPath = socketPath
    }

    /// Connects to the first daemon that answers — `socket`, else `$EARSHOT_SOCKET`, else the system
    /// socket, else the user socket — and introduces the client as `appID`.
    ///
    /// Before sending anything the client makes sure it talks to the Earshot daemon: the user
    /// socket's directories must be this user's own (else ``EarshotError/untrustedSocketDirectory(path:reason:)``)
    /// and the listening process must run as root, this user, or the service user
    /// (`$EARSHOT_DAEMON_USER`, default `earshot`), else ``EarshotError/untrustedDaemon(path:uid:)``.
    /// Neither tries further candidates. A daemon with no free connection slot throws
    /// ``EarshotError/daemonBusy(path:message:)``; ``EarshotError/noDaemon(tried:)`` means none answered.
    public static func connect(socket: String? = nil, appID: String, environment: [String: String] = ProcessInfo.processInfo.environment) async throws -> DaemonConnection {
        var tried: [(path: String, reason: String)] = []
        let explicit = socket != nil || !(environment["EARSHOT_SOCKET"] ?? "").isEmpty
        let userSocket = SocketLocations.user(environment: environment)
        for path in SocketLocations.candidates(explicit: socket, environment: environment) {
            let checkDirectory = !explicit && path == userSocket
            let fd: Int32
            do {
                fd = try await BlockingWork.run("earshot.connect") { () throws(DaemonEndpointError) -> Int32 in
                    try DaemonEndpoint.connect(path: path, checkUserDirectory: checkDirectory, environment: environment)
                }
            } catch DaemonEndpointError.unreachable(let error) {
                tried.append((path, String(cString: strerror(error.errno))))
                continue
            } catch DaemonEndpointError.untrustedDirectory(let error) {
                throw EarshotError.untrustedSocketDirectory(path: error.path ?? path, reason: error.description)
            } catch DaemonEndpointError.untrustedPeer(let path, let uid) {
                throw EarshotError.untrustedDaemon(path: path, uid: uid)
            }
            let connection = DaemonConnection(channel: FrameChannel(fd: fd, label: "earshot.client"), socketPath: path)
            await connection.startReading()
            do {
                await connection.welcomeReceived(try await connection.request(Hello(appId: appID), expecting: Welcome.self))
            } catch {
                await connection.close()
                guard let error = error as? SystemError else { throw error }
                tried.append((path, String(cString: strerror(error.errno))))
                continue
            }
            return connection
        }
        throw EarshotError.noDaemon(tried: tried)
    }

    private func welcomeReceived(_ welcome: Welcome) {
        self.welcome = welcome
    }

    private func startReading() {
        channel.start()
        let frames = channel.frames
        reader = Task { [weak self] in
            do {
                for try await frame in frames {
                    await self?.deliver(frame)
                }
                await self?.finish(EarshotError.disconnected)
            } catch {
                await self?.finish(error)
            }
        }
    }

    private func deliver(_ frame: Frame) {
        if frame.type == ErrorEvent.eventType, frame.requestID == nil, frame.data["session"] == nil {
            refusal = (try? frame.decode(ErrorEvent.self).wireError) ?? WireError(.internalError, "the Earshot daemon closed the connection")
            return
        }
        if frame.requestID == nil, let session = frame.data["session"]?.stringValue {
            sessionHandlers[session]?(frame)
            // A finished session sends nothing more.
            if frame.type == AnalyzerFinished.eventType { sessionHandlers[session] = nil }
            return
        }
        guard let id = frame.requestID, awaiting.keys.contains(id) else { return }
        if frame.type.hasSuffix(".progress") {
            progressHandlers[id]?(frame)
            return
        }
        if let waiter = pending.removeValue(forKey: id) {
            awaiting[id] = nil
            waiter.resume(returning: frame)
        } else {
            awaiting[id] = frame
        }
    }

    /// The error for a connection the daemon refused: busy (no slot) or the daemon's own code.
    private func refusalError(_ wire: WireError) -> EarshotError {
        wire.code == .insufficientResources ? .daemonBusy(path: socketPath, message: wire.message) : .daemon(wire)
    }

    private func finish(_ error: any Error) {
        let error = refusal.map(refusalError) ?? error
        closed = true
        let waiters = pending
        pending = [:]
        awaiting = [:]
        let sessions = sessionHandlers.values
        sessionHandlers = [:]
        let gone = (try? Frame(ErrorEvent(WireError(.internalError, "the Earshot daemon closed the connection")))) ?? Frame(type: ErrorEvent.eventType)
        for handler in sessions { handler(gone) }
        for waiter in waiters.values { waiter.resume(throwing: error) }
    }

    /// Sends `event` (with `payload`) with a fresh `id` and returns the reply, decoded as `Reply`;
    /// an `error` reply throws ``EarshotError/daemon(_:)``.
    public func request<Reply: WireEvent>(_ event: some WireEvent, payload: [UInt8] = [], expecting: Reply.Type,
                                          progress: (@Sendable (Frame) -> Void)? = nil) async throws -> Reply {
        // A daemon that refused the connection (no slot) said why before closing: that, not "disconnected".
        guard !closed else { throw refusal.map(refusalError) ?? EarshotError.disconnected }
        let id = "\(nextID)"
        nextID += 1
        progressHandlers[id] = progress
        defer { progressHandlers[id] = nil }
        var frame = try Frame(event, payload: payload)
        frame.data["id"] = .string(id)
        awaiting[id] = .some(nil)
        do {
            try await channel.send(frame)
        } catch {
            awaiting[id] = nil
            // A daemon that refused the connection said why before closing: wait for the reader
            // to deliver that, then report it instead of the broken pipe.
            await reader?.value
            if let refusal { throw refusalError(refusal) }
            throw error
        }
        let reply: Frame
        if case .some(.some(let early)) = awaiting[id] {
            awaiting[id] = nil
            reply = early
        } else {
            guard !closed else { throw refusal.map(refusalError) ?? EarshotError.disconnected }
            reply = try await withCheckedThrowingContinuation { pending[id] = $0 }
        }
        if reply.type == ErrorEvent.eventType {
            throw EarshotError.daemon(try reply.decode(ErrorEvent.self).wireError)
        }
        do {
            return try reply.decode(Reply.self)
        } catch {
            throw EarshotError.protocolViolation(error.description)
        }
    }

    /// The daemon's status.
    public func status() async throws -> DaemonStatus {
        try await request(StatusRequest(), expecting: DaemonStatus.self)
    }

    /// The daemon's effective configuration.
    public func config() async throws -> ConfigReport {
        try await request(ConfigRequest(), expecting: ConfigReport.self)
    }

    /// Sends `event` expecting no reply (audio).
    public func send(_ event: some WireEvent, payload: [UInt8] = []) async throws {
        guard !closed else { throw EarshotError.disconnected }
        try await channel.send(Frame(event, payload: payload))
    }

    /// Routes events of analysis session `session` to `handler` (nil stops).
    public func subscribe(session: String, _ handler: (@Sendable (Frame) -> Void)?) {
        sessionHandlers[session] = handler
    }

    /// Whether the connection still works.
    public var isOpen: Bool { !closed }

    /// Closes the connection.
    public func close() {
        closed = true
        reader?.cancel()
        channel.close()
    }
}
