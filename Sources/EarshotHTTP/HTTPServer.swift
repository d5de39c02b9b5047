import CMicroHTTPD
import EarshotSystem
import Foundation

/// Limits that keep one client from starving the others.
public struct HTTPLimits: Sendable, Hashable {
    /// Largest request body accepted (uploads beyond it get 413 without being buffered).
    public var maxBodyBytes: Int
    /// Connections served at once (one thread each); further clients wait in the listen backlog.
    public var maxConnections: Int
    /// Seconds of inactivity (no bytes either way) before a connection is closed: bounds slow uploads.
    public var idleTimeoutSeconds: Int

    public init(maxBodyBytes: Int = 25 << 20, maxConnections: Int = 32, idleTimeoutSeconds: Int = 30) {
        self.maxBodyBytes = maxBodyBytes
        self.maxConnections = maxConnections
        self.idleTimeoutSeconds = idleTimeoutSeconds
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
/// Every connection has its own libmicrohttpd thread, so a request waiting for its handler (an
/// async function on the Swift pool) or a slow upload holds only its own thread, never the
/// cooperative pool or another client. Bodies are bounded by ``HTTPLimits/maxBodyBytes`` and
/// forms are parsed by libmicrohttpd's post processor. A handler is cancelled when its client
/// hangs up or the server stops.
public final class HTTPServer: @unchecked Sendable {
    public let limits: HTTPLimits
    let handler: any HTTPHandler
    private let listenFD: Int32
    private let isLocal: Bool
    private var daemon: OpaquePointer?
    private let lock = NSLock()
    // Guarded by `lock`.
    private var exchanges: [ObjectIdentifier: Exchange] = [:]
    private var stopping = false

    /// Starts serving `listenFD` (which the caller keeps owning and closes after ``stop()``).
    /// `local`: the socket is a Unix socket (peers carry credentials).
    public init(listening listenFD: Int32, local: Bool, limits: HTTPLimits = HTTPLimits(), handler: any HTTPHandler) throws(HTTPServerError) {
        self.listenFD = listenFD
        self.isLocal = local
        self.limits = limits
        self.handler = handler
        let me = Unmanaged.passUnretained(self).toOpaque()
        // Per-connection buffer: headers and form chunks, not the body (bodies are copied out).
        let memory = 128 << 10
        guard let daemon = earshot_mhd_start(listenFD, UInt32(limits.maxConnections), UInt32(limits.idleTimeoutSeconds), memory,
                                             HTTPServer.access, me, HTTPServer.completed, me) else {
            throw .startFailed(listenFD: listenFD)
        }
        self.daemon = daemon
    }

    /// Stops accepting, cancels running handlers and waits for the connection threads to end.
    /// Blocking: call it from a dedicated thread, not the cooperative pool.
    public func stop() {
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

    private static let completed: MHD_RequestCompletedCallback = { cls, _, context, _ in
        guard let cls, let context, let opaque = context.pointee else { return }
        let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
        let exchange = Unmanaged<Exchange>.takeRetainedValue(Unmanaged<Exchange>.fromOpaque(opaque))()
        context.pointee = nil
        exchange.close()
        server.lock.withLock { _ = server.exchanges.removeValue(forKey: ObjectIdentifier(exchange)) }
    }

    private func begin(_ connection: OpaquePointer, url: String, method: String) -> Exchange {
        let fd = earshot_mhd_connection_fd(connection)
        let peer: HTTPPeer
        if isLocal, fd >= 0, let credentials = try? PeerCredentials.of(socket: fd) {
            peer = .local(credentials)
        } else {
            peer = .network(address: Self.address(earshot_mhd_client_address(connection)))
        }
        let head = HTTPRequestHead(method: method, path: url, query: Self.values(connection, earshot_mhd_argument_kind),
                                   headers: Self.values(connection, earshot_mhd_header_kind), peer: peer)
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

    private static func address(_ address: UnsafePointer<sockaddr>?) -> String {
        guard let address else { return "unknown" }
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        var service = [CChar](repeating: 0, count: Int(NI_MAXSERV))
        let length = socklen_t(address.pointee.sa_family == sa_family_t(AF_INET6) ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size)
        guard getnameinfo(address, length, &host, socklen_t(host.count), &service, socklen_t(service.count), NI_NUMERICHOST | NI_NUMERICSERV) == 0 else { return "unknown" }
        let name = String(cBuffer: host)
        let port = String(cBuffer: service)
        return name.contains(":") ? "[\(name)]:\(port)" : "\(name):\(port)"
    }
}
