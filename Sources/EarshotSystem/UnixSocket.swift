#if canImport(Glibc)
import Glibc
#endif

/// Unix stream socket set-up: listening, connecting, accepting. Every fd is close-on-exec and
/// non-blocking, so no call here can stall a thread.
public enum UnixSocket {
    /// Longest path a `sockaddr_un` holds.
    public static let maxPathLength = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    /// A socket address for `path`; throws `ENAMETOOLONG` when it does not fit.
    static func address(_ path: String) throws(SystemError) -> sockaddr_un {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count <= maxPathLength else { throw SystemError("sockaddr_un(\(path))", errno: ENAMETOOLONG) }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return addr
    }

    static func newSocket() throws(SystemError) -> Int32 {
        try systemCall("socket") { socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0) }
    }

    /// Binds and listens on `path` with file mode `mode`. The caller handles stale sockets first.
    public static func listen(path: String, mode: mode_t, backlog: Int32 = 128) throws(SystemError) -> Int32 {
        let fd = try newSocket()
        do throws(SystemError) {
            var addr = try address(path)
            // Bind with a restrictive umask so the socket never exists with looser permissions.
            let oldMask = umask(0o177)
            let bound = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            let bindErrno = Glibc.errno
            umask(oldMask)
            if bound == -1 { throw SystemError("bind(\(path))", errno: bindErrno) }
            try systemCall("chmod(\(path))") { chmod(path, mode) }
            try systemCall("listen") { Glibc.listen(fd, backlog) }
            return fd
        } catch {
            close(fd)
            throw error
        }
    }

    /// Connects to the socket at `path`. Fails at once (no waiting) when nothing listens.
    public static func connect(path: String) throws(SystemError) -> Int32 {
        let fd = try newSocket()
        do throws(SystemError) {
            var addr = try address(path)
            try systemCall("connect(\(path))") {
                withUnsafePointer(to: &addr) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
                }
            }
            return fd
        } catch {
            close(fd)
            throw error
        }
    }

    /// Accepts one pending connection; `nil` when none is pending.
    public static func accept(_ listener: Int32) throws(SystemError) -> Int32? {
        let fd: Int32
        do {
            fd = try systemCall("accept") { Glibc.accept(listener, nil, nil) }
        } catch where error.errno == EAGAIN || error.errno == EWOULDBLOCK || error.errno == ECONNABORTED {
            return nil
        }
        do {
            try prepareInherited(fd)
        } catch {
            Glibc.close(fd)
            throw error
        }
        return fd
    }

    /// Makes an inherited fd (socket activation) non-blocking and close-on-exec.
    public static func prepareInherited(_ fd: Int32) throws(SystemError) {
        let flags = try systemCall("fcntl(F_GETFL)") { fcntl(fd, F_GETFL) }
        try systemCall("fcntl(F_SETFL)") { fcntl(fd, F_SETFL, flags | O_NONBLOCK) }
        try systemCall("fcntl(F_SETFD)") { fcntl(fd, F_SETFD, FD_CLOEXEC) }
    }

    /// The path a listening socket is bound to, if it is a path socket.
    public static func boundPath(_ fd: Int32) -> String? {
        var addr = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let ok = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard ok == 0 else { return nil }
        let path = withUnsafeBytes(of: addr.sun_path) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        return path.isEmpty ? nil : path
    }
}
