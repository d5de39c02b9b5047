import CMicroHTTPD
import Dispatch
import EarshotSystem
import Foundation

/// Limits that keep one client from starving the others.
public struct HTTPLimits: Sendable, Hashable {
    /// Largest request body accepted (uploads beyond it get 413 without being buffered).
    public var maxBodyBytes: Int
    /// Connections served at once (one thread each); the handler's ``HTTPHandler/admit(_:)``
    /// shares them out between peers, and this is libmicrohttpd's own backstop.
    public var maxConnections: Int
    /// Seconds of inactivity (no bytes either way) before a connection is closed.
    public var idleTimeoutSeconds: Int
    /// What a client must send by when (headers, body rate, whole upload).
    public var pace: HTTPPace

    public init(maxBodyBytes: Int = 25 << 20, maxConnections: Int = 32, idleTimeoutSeconds: Int = 30, pace: HTTPPace = HTTPPace()) {
        self.maxBodyBytes = maxBodyBytes
        self.maxConnections = maxConnections
        self.idleTimeoutSeconds = idleTimeoutSeconds
        self.pace = pace
    }
}

/// Errors starting the server.
public enum HTTPServerError: Error, Sendable, CustomStringConvertible {
    case startFailed(listenFD: Int32)
    public var description: String {
        switch self {
        case .startFailed(let fd): "libmicrohttpd could not start on listening socket \(fd)"
        }
    }
}

/// An HTTP/1.1 server (libmicrohttpd) on a socket that is already listening: a Unix socket, whose
/// peers are identified by `SO_PEERCRED`, or a TCP socket, whose peers are identified by address.
///
/// The server accepts on its own queue and asks the handler to ``HTTPHandler/admit(_:)`` each
/// peer before libmicrohttpd gets the connection: a refused one is answered at once and closed,
/// costing no thread. Every admitted connection has its own libmicrohttpd thread, so a request
/// waiting for its handler (an async function on the Swift pool) holds only its own thread, never
/// the cooperative pool or another client; ``HTTPPace`` (on the injected clock) cuts connections
/// whose headers, body rate or upload take too long, so a trickle cannot hold a thread. Bodies are
/// bounded by ``HTTPLimits/maxBodyBytes`` and forms are parsed by libmicrohttpd's post processor.
/// A handler is cancelled when its client hangs up or the server stops.
public final class HTTPServer: @unchecked Sendable {
    public let limits: HTTPLimits
    let handler: any HTTPHandler
    private let listenFD: Int32
    private let isLocal: Bool
    private let clock: any ServiceClock
    let watch: ConnectionWatch
    private var daemon: OpaquePointer?
    private let acceptQueue = DispatchQueue(label: "earshot.http.accept")
    private var acceptSource: DispatchSourceRead?
    /// Refused connections lingering (``answer(_:_:)``); on `acceptQueue`.
    private var lingering = 0
    private var sweeper: Task<Void, Never>?
    private let lock = NSLock()
    // Guarded by `lock`.
    private var exchanges: [ObjectIdentifier: Exchange] = [:]
    private var stopping = false

    /// Starts serving `listenFD` (which the caller keeps owning and closes after ``stop()``).
    /// `local`: the socket is a Unix socket (peers carry credentials). `clock` times ``HTTPPace``.
    public init(listening listenFD: Int32, local: Bool, limits: HTTPLimits = HTTPLimits(), clock: any ServiceClock = SystemServiceClock(),
                handler: any HTTPHandler) throws(HTTPServerError) {
        self.listenFD = listenFD
        self.isLocal = local
        self.limits = limits
        self.handler = handler
        self.clock = clock
        watch = ConnectionWatch(pace: limits.pace)
        let me = Unmanaged.passUnretained(self).toOpaque()
        // Per-connection buffer: headers and form chunks, not the body (bodies are copied out).
        let memory = 128 << 10
        guard let daemon = earshot_mhd_start_fed(UInt32(limits.maxConnections), UInt32(limits.idleTimeoutSeconds), memory,
                                                 HTTPServer.access, me, HTTPServer.completed, me, HTTPServer.notified, me) else {
            throw .startFailed(listenFD: listenFD)
        }
        self.daemon = daemon
        startAccepting()
        sweeper = Task { [watch, clock, weak self] in
            while !Task.isCancelled {
                do { try await clock.sleep(for: .seconds(1)) } catch { return }
                watch.sweep(at: clock.elapsed) { fd, peer, why in
                    // The connection's thread sees the end of its socket and closes it.
                    shutdown(fd, Int32(SHUT_RDWR))
                    self?.handler.cut(peer, because: why)
                }
            }
        }
    }

    /// Stops accepting, cancels running handlers and waits for the connection threads to end.
    /// Blocking: call it from a dedicated thread, not the cooperative pool.
    public func stop() {
        acceptQueue.sync {
            acceptSource?.cancel()
            acceptSource = nil
        }
        sweeper?.cancel()
        let running: [Exchange] = lock.withLock {
            stopping = true
            return Array(exchanges.values)
        }
        running.forEach { $0.cancel() }
        if let daemon {
            MHD_stop_daemon(daemon)
            self.daemon = nil
        }
    }

    // MARK: - Accepting

    private func startAccepting() {
        acceptQueue.sync {
            let source = DispatchSource.makeReadSource(fileDescriptor: listenFD, queue: acceptQueue)
            source.setEventHandler { [weak self] in self?.acceptWaiting() }
            acceptSource = source
            source.resume()
        }
    }

    /// Accepts every waiting connection: admitted ones go to libmicrohttpd, refused ones are
    /// answered and closed here.
    private func acceptWaiting() {
        while let daemon {
            let client: Int32
            do throws(SystemError) {
                guard let accepted = try UnixSocket.accept(listenFD) else { return }
                client = accepted
            } catch {
                // Out of fds: the next readiness event tries again.
                return
            }
            var address = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(client, $0, &length) } }
            let peer: HTTPPeer
            if isLocal {
                guard let credentials = try? PeerCredentials.of(socket: client) else {
                    close(client)
                    continue
                }
                peer = .local(credentials)
            } else {
                peer = .network(TCPSocket.peer(client))
            }
            if let refusal = handler.admit(peer) {
                answer(client, refusal)
                continue
            }
            watch.admitted(client, peer: peer, at: clock.elapsed)
            let added = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { MHD_add_connection(daemon, client, $0, length) }
            }
            if added != earshot_mhd_yes, watch.closed(client) != nil {
                // libmicrohttpd closed the socket: the slot goes back.
                handler.closed(peer)
            }
        }
    }

    /// Writes `response` to a connection refused before anything was read and ends its side. The
    /// socket lingers (on the accept queue, no thread) reading and dropping what the client sends
    /// until it hangs up or ``refusalLinger`` passes, so the client can finish sending its request
    /// and then read the answer; past ``maxLingering`` refused connections it is closed at once.
    private func answer(_ fd: Int32, _ response: HTTPResponse) {
        guard case .bytes(let body) = response.body else {
            close(fd)
            return
        }
        var head = "HTTP/1.1 \(response.status) \(String(cString: MHD_get_reason_phrase_for(UInt32(response.status))))\r\n"
        for header in response.headers { head += "\(header.name): \(header.value)\r\n" }
        head += "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        let message = Data(head.utf8) + body
        _ = message.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
        shutdown(fd, Int32(SHUT_WR))
        guard lingering < Self.maxLingering else {
            close(fd)
            return
        }
        lingering += 1
        let linger = Linger(fd: fd, queue: acceptQueue) { [weak self] in self?.lingering -= 1 }
        acceptQueue.asyncAfter(deadline: .now() + Self.refusalLinger) { linger.end() }
    }

    /// A refused connection reading and dropping its client's bytes until the client hangs up or
    /// ``end()``; then closed. Used on one queue only.
    private final class Linger: @unchecked Sendable {
        private let source: any DispatchSourceRead

        init(fd: Int32, queue: DispatchQueue, ended: @escaping @Sendable () -> Void) {
            source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
            source.setEventHandler { [source] in
                var scratch = [UInt8](repeating: 0, count: 16 << 10)
                if recv(fd, &scratch, scratch.count, Int32(MSG_DONTWAIT)) <= 0 { source.cancel() }
            }
            source.setCancelHandler {
                close(fd)
                ended()
            }
            source.resume()
        }

        func end() { source.cancel() }
    }

    /// How long a refused connection may linger: 1 s.
    static let refusalLinger = DispatchTimeInterval.seconds(1)
    /// Most refused connections lingering at once.
    static let maxLingering = 256

    /// The libmicrohttpd version, for `--version`.
    public static var libraryVersion: String { String(cString: MHD_get_version()) }

    // MARK: - libmicrohttpd callbacks (on the connection's thread)

    private static let access: MHD_AccessHandlerCallback = { cls, connection, url, method, _, uploadData, uploadSize, context in
        guard let cls, let connection, let uploadSize, let context else { return earshot_mhd_no }
        let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
        if context.pointee == nil {
            let exchange = server.begin(connection, url: url.map { String(cString: $0) } ?? "/", method: method.map { String(cString: $0) } ?? "GET")
            context.pointee = Unmanaged.passRetained(exchange).toOpaque()
            return exchange.started()
        }
        let exchange = Unmanaged<Exchange>.fromOpaque(context.pointee!).takeUnretainedValue()
        if uploadSize.pointee > 0 {
            let count = uploadSize.pointee
            uploadSize.pointee = 0
            return exchange.received(UnsafeRawBufferPointer(start: uploadData, count: count))
        }
        return exchange.finished()
    }

    /// A connection starts (its fd is kept as its socket context) or closes (its slot goes back).
    private static let notified: MHD_NotifyConnectionCallback = { cls, connection, socketContext, code in
        guard let cls, let connection, let socketContext else { return }
        let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
        if code == earshot_mhd_notify_closed {
            guard let stored = socketContext.pointee else { return }
            socketContext.pointee = nil
            if let peer = server.watch.closed(Int32(Int(bitPattern: stored) - 1)) { server.handler.closed(peer) }
        } else {
            socketContext.pointee = UnsafeMutableRawPointer(bitPattern: Int(earshot_mhd_connection_fd(connection)) + 1)
        }
    }

    private static let completed: MHD_RequestCompletedCallback = { cls, _, context, _ in
        guard let cls, let context, let opaque = context.pointee else { return }
        let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
        let exchange = Unmanaged<Exchange>.takeRetainedValue(Unmanaged<Exchange>.fromOpaque(opaque))()
        context.pointee = nil
        exchange.close()
        server.watch.responded(exchange.fd, at: server.clock.elapsed)
        server.lock.withLock { _ = server.exchanges.removeValue(forKey: ObjectIdentifier(exchange)) }
    }

    private func begin(_ connection: OpaquePointer, url: String, method: String) -> Exchange {
        let fd = earshot_mhd_connection_fd(connection)
        let peer: HTTPPeer
        if isLocal, fd >= 0, let credentials = try? PeerCredentials.of(socket: fd) {
            peer = .local(credentials)
        } else {
            peer = .network(TCPSocket.peer(fd))
        }
        let head = HTTPRequestHead(method: method, path: url, query: Self.values(connection, earshot_mhd_argument_kind),
                                   headers: Self.values(connection, earshot_mhd_header_kind), peer: peer)
        watch.headersEnded(fd, at: clock.elapsed)
        let exchange = Exchange(server: self, connection: connection, fd: fd, head: head)
        let refused = lock.withLock {
            if stopping { return true }
            exchanges[ObjectIdentifier(exchange)] = exchange
            return false
        }
        if refused { exchange.refuse(HTTPRejection.shuttingDown) }
        return exchange
    }

    var isStopping: Bool { lock.withLock { stopping } }

    private static func values(_ connection: OpaquePointer, _ kind: MHD_ValueKind) -> [String: String] {
        final class Box { var values: [String: String] = [:] }
        let box = Box()
        _ = MHD_get_connection_values(connection, kind, { cls, _, key, value in
            guard let cls, let key else { return earshot_mhd_yes }
            Unmanaged<Box>.fromOpaque(cls).takeUnretainedValue().values[String(cString: key)] = value.map { String(cString: $0) } ?? ""
            return earshot_mhd_yes
        }, Unmanaged.passUnretained(box).toOpaque())
        return box.values
    }

}
