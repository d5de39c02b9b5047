import EarshotHTTP
import EarshotSystem
import Foundation

/// An HTTP front listener and its server: the Unix socket beside the main one (created once the
/// daemon owns that one, so a stale socket here is ours to replace; removed at stop), or TCP.
final class HTTPListener: Sendable {
    /// The Unix socket's path (nil for TCP).
    let path: String?
    private let fd: Int32
    private let server: HTTPServer

    /// Binds `path` (replacing a stale socket, never any other file) and starts serving.
    convenience init(path: String, mode: mode_t, limits: HTTPLimits, clock: any ServiceClock, handler: any HTTPHandler) throws {
        var status = stat()
        if lstat(path, &status) == 0 {
            guard status.st_mode & S_IFMT == S_IFSOCK else { throw ListenerError.pathOccupied(path) }
            unlink(path)
        }
        let fd = try UnixSocket.listen(path: path, mode: mode)
        try self.init(fd: fd, path: path, local: true, limits: limits, clock: clock, handler: handler)
    }

    /// Listens on TCP `host:port` and starts serving (peers identified by key, not credentials).
    convenience init(host: String, port: UInt16, limits: HTTPLimits, clock: any ServiceClock, handler: any HTTPHandler) throws {
        let fd = try TCPSocket.listen(host: host, port: port)
        try self.init(fd: fd, path: nil, local: false, limits: limits, clock: clock, handler: handler)
    }

    private init(fd: Int32, path: String?, local: Bool, limits: HTTPLimits, clock: any ServiceClock, handler: any HTTPHandler) throws {
        do {
            server = try HTTPServer(listening: fd, local: local, limits: limits, clock: clock, handler: handler)
        } catch {
            close(fd)
            if let path { unlink(path) }
            throw error
        }
        self.path = path
        self.fd = fd
    }

    /// Where it listens, for the log.
    var endpoint: String { path ?? "tcp \(TCPSocket.boundPort(fd).map(String.init) ?? "?")" }

    /// Cancels running requests, waits for the server's threads (on a dedicated thread), removes
    /// the socket.
    func stop() async {
        let server = self.server
        await BlockingWork.run("earshot.http.stop") { server.stop() }
        close(fd)
        if let path { unlink(path) }
    }
}
