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
    /// The socket is bound under umask 0177 (it never exists with more than 0600), then given
    /// `mode` by ``setMode(ofSocketAt:to:)``, which never follows a symlink.
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
            try setMode(ofSocketAt: path, to: mode)
            try systemCall("listen") { Glibc.listen(fd, backlog) }
            return fd
        } catch {
            close(fd)
            throw error
        }
    }

    /// Sets the file mode of the socket at `path` without following a symlink, on the very inode
    /// checked: opens the path with `O_PATH | O_NOFOLLOW` (a symlink is then the link itself, never
    /// its target), requires a socket owned by this process's euid, and changes the mode through
    /// `/proc/self/fd/N`, which names that inode, not the path. (This is what glibc's
    /// `fchmodat(AT_SYMLINK_NOFOLLOW)` does on kernels without `fchmodat2`, plus the type and
    /// owner check, so neither a symlink nor a planted hard link to a file has its mode changed.)
    ///
    /// Why not the alternatives: `chmod(path)` follows symlinks; `fchmod` on the socket fd after
    /// `bind` changes the socket's own (sockfs) inode, not the file `bind` created; `fchmod` before
    /// `bind` works on Linux (bind copies that mode, minus the umask), but would need the
    /// process-wide umask loosened while other threads create files.
    public static func setMode(ofSocketAt path: String, to mode: mode_t) throws(SystemError) {
        let fd = try systemCall("open(\(path), O_PATH|O_NOFOLLOW)") { open(path, oPath | O_NOFOLLOW | O_CLOEXEC) }
        defer { close(fd) }
        var st = stat()
        try systemCall("fstat(\(path))") { fstat(fd, &st) }
        let type = st.st_mode & S_IFMT
        guard type == S_IFSOCK else {
            throw SystemError("chmod(\(path)): refusing a \(type == S_IFLNK ? "symbolic link" : "file that is not a socket")", errno: type == S_IFLNK ? ELOOP : ENOTSOCK)
        }
        guard st.st_uid == geteuid() else { throw SystemError("chmod(\(path)): the socket is owned by uid \(st.st_uid)", errno: EPERM) }
        try systemCall("chmod(\(path) via /proc/self/fd)") { chmod("/proc/self/fd/\(fd)", mode) }
    }

    /// `O_PATH` (Linux; Glibc's module does not export it).
    static let oPath: Int32 = 0o10000000

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
