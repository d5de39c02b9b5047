import EarshotSystem
import Glibc

/// Loopback TCP ports for servers a test or benchmark starts.
public enum LoopbackPort {
    /// A port on 127.0.0.1 nothing listens on right now.
    public static func free() throws -> UInt16 {
        let fd = try TCPSocket.listen(host: "127.0.0.1", port: 0)
        defer { close(fd) }
        guard let port = TCPSocket.boundPort(fd) else { throw SystemError("getsockname", errno: EADDRNOTAVAIL) }
        return port
    }
}
