import Foundation

/// The host's interface addresses (`getifaddrs`).
public enum NetworkInterfaces {
    /// One IPv4 or IPv6 address of an interface.
    public struct Address: Sendable, Hashable {
        public var interface: String
        /// `if_nametoindex` of the interface (0: unknown).
        public var index: UInt32
        /// Numeric form, without an IPv6 zone.
        public var address: String
        public var isIPv4: Bool
        public var isUp: Bool
        public var isLoopback: Bool
        public var isMulticast: Bool
    }

    /// Every IPv4 and IPv6 address, in the order the kernel lists them.
    public static func addresses() -> [Address] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return [] }
        defer { freeifaddrs(list) }
        var found: [Address] = []
        var next = list
        while let entry = next {
            next = entry.pointee.ifa_next
            guard let address = entry.pointee.ifa_addr, [AF_INET, AF_INET6].contains(Int32(address.pointee.sa_family)) else { continue }
            let isIPv4 = Int32(address.pointee.sa_family) == AF_INET
            var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            let length = socklen_t(isIPv4 ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size)
            guard getnameinfo(address, length, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST) == 0 else { continue }
            let numeric = String(cBuffer: text)
            let flags = Int32(bitPattern: entry.pointee.ifa_flags)
            found.append(Address(interface: String(cString: entry.pointee.ifa_name), index: if_nametoindex(entry.pointee.ifa_name),
                                 address: String(numeric.split(separator: "%").first ?? ""), isIPv4: isIPv4,
                                 isUp: flags & Int32(IFF_UP) != 0, isLoopback: flags & Int32(IFF_LOOPBACK) != 0, isMulticast: flags & Int32(IFF_MULTICAST) != 0))
        }
        return found
    }
}
