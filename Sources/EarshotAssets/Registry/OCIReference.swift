/// A catalog source in an OCI registry: `oci://HOST[:PORT]/REPOSITORY[:TAG|@sha256:DIGEST]`
/// (the tag defaults to `latest`). Names follow the Distribution grammar: lower-case path
/// components of letters and digits joined by `.`, `_`, `__` or dashes.
public struct OCIReference: Sendable, Hashable, CustomStringConvertible {
    /// What the reference selects in the repository.
    public enum Selector: Sendable, Hashable {
        case tag(String)
        /// `sha256:` and 64 lower-case hex digits.
        case digest(String)
    }

    /// The registry's authority, `host` or `host:port` (IPv6 in brackets).
    public var host: String
    public var repository: String
    public var selector: Selector

    public init(host: String, repository: String, selector: Selector) {
        self.host = host
        self.repository = repository
        self.selector = selector
    }

    /// Whether `url` names an OCI source (the scheme alone; ``parse(_:)`` checks the rest).
    public static func isOCI(_ url: String) -> Bool { url.lowercased().hasPrefix("oci://") }

    /// Parses an `oci://` URL; a typed error says which part is wrong.
    public static func parse(_ text: String) throws(RegistryError) -> OCIReference {
        guard isOCI(text) else { throw .invalidReference(text, "expected oci://HOST[:PORT]/REPOSITORY[:TAG|@sha256:DIGEST]") }
        let rest = text.dropFirst("oci://".count)
        guard let slash = rest.firstIndex(of: "/") else { throw .invalidReference(text, "no repository after the host") }
        let host = String(rest[..<slash])
        guard isValidAuthority(host) else { throw .invalidReference(text, "\"\(host)\" is not a host name with an optional port") }
        var path = String(rest[rest.index(after: slash)...])
        let selector: Selector
        if let at = path.firstIndex(of: "@") {
            let digest = String(path[path.index(after: at)...])
            guard isValidDigest(digest) else { throw .invalidReference(text, "a digest is sha256: and 64 lower-case hex digits") }
            selector = .digest(digest)
            path = String(path[..<at])
        } else if let colon = path.lastIndex(of: ":"), !path[colon...].contains("/") {
            let tag = String(path[path.index(after: colon)...])
            guard isValidTag(tag) else { throw .invalidReference(text, "\"\(tag)\" is not a tag (1–128 of A-Z a-z 0-9 _ . -, not starting with . or -)") }
            selector = .tag(tag)
            path = String(path[..<colon])
        } else {
            selector = .tag("latest")
        }
        guard isValidRepository(path) else {
            throw .invalidReference(text, "\"\(path)\" is not a repository name (lower-case components of a-z 0-9 joined by . _ __ or -, separated by /)")
        }
        return OCIReference(host: host, repository: path, selector: selector)
    }

    /// The tag or digest as the registry API takes it in `/manifests/<reference>`.
    public var selectorText: String {
        switch selector {
        case .tag(let tag): tag
        case .digest(let digest): digest
        }
    }

    public var description: String {
        switch selector {
        case .tag(let tag): "oci://\(host)/\(repository):\(tag)"
        case .digest(let digest): "oci://\(host)/\(repository)@\(digest)"
        }
    }

    /// The host without its port, lower-cased (brackets of an IPv6 literal removed).
    public var hostName: String { Self.hostName(of: host) }

    static func hostName(of authority: String) -> String {
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
            return String(authority[authority.index(after: authority.startIndex)..<close]).lowercased()
        }
        return String(authority.split(separator: ":", maxSplits: 1).first ?? "").lowercased()
    }

    /// `sha256:` and 64 lower-case hex digits.
    public static func isValidDigest(_ digest: String) -> Bool {
        digest.hasPrefix("sha256:") && CatalogAsset.isValidDigest(String(digest.dropFirst(7)))
    }

    static func isValidTag(_ tag: String) -> Bool {
        let bytes = Array(tag.utf8)
        guard (1...128).contains(bytes.count), bytes[0] != UInt8(ascii: "."), bytes[0] != UInt8(ascii: "-") else { return false }
        return bytes.allSatisfy { isAlphanumeric($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") }
    }

    static func isValidRepository(_ name: String) -> Bool {
        guard (1...255).contains(name.utf8.count) else { return false }
        return name.split(separator: "/", omittingEmptySubsequences: false).allSatisfy { component in
            let bytes = Array(component.utf8)
            guard let first = bytes.first, let last = bytes.last, isLowerAlphanumeric(first), isLowerAlphanumeric(last) else { return false }
            var index = 0
            while index < bytes.count {
                let byte = bytes[index]
                if isLowerAlphanumeric(byte) { index += 1; continue }
                // A separator: ".", "_", "__" or a run of dashes, always between alphanumerics.
                var end = index
                if byte == UInt8(ascii: "-") {
                    while end < bytes.count, bytes[end] == UInt8(ascii: "-") { end += 1 }
                } else if byte == UInt8(ascii: "_") {
                    end += 1
                    if end < bytes.count, bytes[end] == UInt8(ascii: "_") { end += 1 }
                } else if byte == UInt8(ascii: ".") {
                    end += 1
                } else {
                    return false
                }
                guard end < bytes.count, isLowerAlphanumeric(bytes[end]) else { return false }
                index = end
            }
            return true
        }
    }

    static func isValidAuthority(_ authority: String) -> Bool {
        // `[IPv6]` or a host name, then an optional `:port`.
        let host: Substring
        var port: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return false }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            guard after.isEmpty || after.hasPrefix(":") else { return false }
            if !after.isEmpty { port = after.dropFirst() }
        } else if let colon = authority.firstIndex(of: ":") {
            host = authority[..<colon]
            port = authority[authority.index(after: colon)...]
        } else {
            host = Substring(authority)
        }
        if let port {
            guard let number = Int(port), (1...65535).contains(number), port.allSatisfy(\.isASCII) else { return false }
        }
        if authority.hasPrefix("[") {
            return !host.isEmpty && host.allSatisfy { $0.isHexDigit || $0 == ":" || $0 == "." }
        }
        let labels = host.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...253).contains(host.utf8.count) else { return false }
        return labels.allSatisfy { label in
            let bytes = Array(label.utf8)
            guard (1...63).contains(bytes.count), bytes.first != UInt8(ascii: "-"), bytes.last != UInt8(ascii: "-") else { return false }
            return bytes.allSatisfy { isAlphanumeric($0) || $0 == UInt8(ascii: "-") }
        }
    }

    private static func isLowerAlphanumeric(_ byte: UInt8) -> Bool { (0x61...0x7a).contains(byte) || (0x30...0x39).contains(byte) }
    private static func isAlphanumeric(_ byte: UInt8) -> Bool { isLowerAlphanumeric(byte) || (0x41...0x5a).contains(byte) }
}
