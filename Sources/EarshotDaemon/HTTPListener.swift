import EarshotHTTP
import EarshotSystem
import Foundation

/// The HTTP front's Unix socket and server: created beside the main socket once the daemon owns
/// that one (so a stale socket here is ours to replace), removed at stop.
final class HTTPListener: Sendable {
    let path: String
    private let fd: Int32
    private let server: HTTPServer

    /// Binds `path` (replacing a stale socket, never any other file) and starts serving.
    init(path: String, mode: mode_t, limits: HTTPLimits, handler: any HTTPHandler) throws {
        var status = stat()
        if lstat(path, &status) == 0 {
            guard status.st_mode & S_IFMT == S_IFSOCK else { throw ListenerError.pathOccupied(path) }
            unlink(path)
        }
        let fd = try UnixSocket.listen(path: path, mode: mode)
        do {
            server = try HTTPServer(listening: fd, local: true, limits: limits, handler: handler)
        } catch {
            close(fd)
            unlink(path)
            throw error
        }
        self.path = path
        self.fd = fd
    }

    /// Cancels running requests, waits for the server's threads (on a dedicated thread), removes
    /// the socket.
    func stop() async {
        let server = self.server
        await BlockingWork.run("earshot.http.stop") { server.stop() }
        close(fd)
        unlink(path)
    }
}
