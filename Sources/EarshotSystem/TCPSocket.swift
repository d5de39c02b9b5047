import Foundation

/// TCP listening sockets (non-blocking, close-on-exec) for the network fronts. Accept with
/// ``UnixSocket/accept(_:)``, which works on any stream socket.
public enum TCPSocket {
    /// Parses `HOST:PORT` (`[::1]:10300` for IPv6); nil if malformed.
    public static func endpoint(_ text: String) -> (host: String, port: UInt16)? {
        let trimmed = text.hasPrefix("tcp://") ? String(text.dropFirst(6)) : text
        guard let colon = trimmed.lastIndex(of: ":"), let port = UInt16(trimmed[trimmed.index(after: colon)...]) else { return nil }
        var host = String(trimmed[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return host.isEmpty ? nil : (host, port)
    }

    /// Binds and listens on `host` (a numeric address) and `port` (0: any free port).
    public static func listen(host: String, port: UInt16, backlog: Int32 = 128) throws(SystemError) -> Int32 {
        var hints = addrinfo()
        hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &found)
        guard status == 0, let info = found else { throw SystemError("getaddrinfo(\(host)): \(String(cString: gai_strerror(status)))", errno: EINVAL) }
        defer { freeaddrinfo(found) }
        let fd = try systemCall("socket") { socket(info.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0) }
        do throws(SystemError) {
            var on: Int32 = 1
            try systemCall("setsockopt(SO_REUSEADDR)") { setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size)) }
            try systemCall("bind(\(host):\(port))") { bind(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) }
            try systemCall("listen") { Glibc.listen(fd, backlog) }
            return fd
        } catch {
            close(fd)
            throw error
        }
    }

    /// The port `fd` is bound to.
    public static func boundPort(_ fd: Int32) -> UInt16? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        guard ok == 0 else { return nil }
        let family = Int32(storage.ss_family)
        return withUnsafePointer(to: &storage) { pointer in
            switch family {
            case AF_INET: pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
            case AF_INET6: pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
            default: nil
            }
        }
    }

    /// The numeric host and port of connected socket `fd`'s peer.
    public static func peer(_ fd: Int32) -> (host: String, port: UInt16)? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        var service = [CChar](repeating: 0, count: Int(NI_MAXSERV))
        let found = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                getpeername(fd, address, &length) == 0
                    && getnameinfo(address, length, &host, socklen_t(host.count), &service, socklen_t(service.count), NI_NUMERICHOST | NI_NUMERICSERV) == 0
            }
        }
        guard found, Int32(storage.ss_family) == AF_INET || Int32(storage.ss_family) == AF_INET6 else { return nil }
        return (String(cBuffer: host), UInt16(String(cBuffer: service)) ?? 0)
    }

    /// Whether `host` is a loopback address.
    public static func isLoopback(_ host: String) -> Bool { host == "::1" || host.hasPrefix("127.") || host == "localhost" }
}
