import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A user name and password (or token) for one registry host. Its description never shows them.
public struct RegistryCredentials: Sendable, Hashable, CustomStringConvertible {
    public var username: String
    public var password: String

    public init(username: String, password: String) {
        self.username = username
        self.password = password
    }

    /// `Basic base64(username:password)`.
    var basicAuthorization: String { "Basic " + Data("\(username):\(password)".utf8).base64EncodedString() }

    public var description: String { "credentials for \(username)" }
}

/// The credentials of `[Registry] AuthFile`: the `auths` object of `~/.docker/config.json`
/// (`{"auths": {"HOST[:PORT]": {"auth": base64("user:password")}}}`, or `username` and
/// `password` fields). The file must belong to root (or the daemon's own user) and be readable by
/// its owner only, as ssh demands of a private key; anything else is refused, not used.
public enum RegistryAuthFile {
    /// Largest credentials file read.
    static let maxBytes = 1 << 20

    /// Credentials by registry authority (`host` or `host:port`, lower-cased).
    public static func load(_ path: String) throws(RegistryError) -> [String: RegistryCredentials] {
        var info = stat()
        guard stat(path, &info) == 0 else { throw .authFile(path: path, String(cString: strerror(errno))) }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw .authFile(path: path, "not a regular file") }
        guard info.st_uid == 0 || info.st_uid == geteuid() else {
            throw .authFile(path: path, "owned by uid \(info.st_uid); it must belong to root or to the daemon's user")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw .authFile(path: path, "mode \(String(info.st_mode & 0o777, radix: 8)) lets others read it; chmod 600 it")
        }
        guard info.st_size <= maxBytes, let data = FileManager.default.contents(atPath: path) else {
            throw .authFile(path: path, "unreadable or larger than \(maxBytes) bytes")
        }
        return try parse(data, path: path)
    }

    /// Parses the JSON of a credentials file (`path` only names it in errors).
    static func parse(_ data: Data, path: String) throws(RegistryError) -> [String: RegistryCredentials] {
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw .authFile(path: path, "not a JSON object")
        }
        guard let auths = object["auths"] as? [String: Any] else { throw .authFile(path: path, "no \"auths\" object") }
        var found: [String: RegistryCredentials] = [:]
        for (key, value) in auths {
            let host = authority(key)
            guard let entry = value as? [String: Any], !host.isEmpty else { throw .authFile(path: path, "entry \"\(key)\" is not an object") }
            if let auth = entry["auth"] as? String, !auth.isEmpty {
                guard let decoded = Data(base64Encoded: auth).map({ String(decoding: $0, as: UTF8.self) }), let colon = decoded.firstIndex(of: ":") else {
                    throw .authFile(path: path, "entry \"\(key)\": \"auth\" is not base64 of user:password")
                }
                found[host] = RegistryCredentials(username: String(decoded[..<colon]), password: String(decoded[decoded.index(after: colon)...]))
            } else if let username = entry["username"] as? String, let password = entry["password"] as? String {
                found[host] = RegistryCredentials(username: username, password: password)
            } else {
                throw .authFile(path: path, "entry \"\(key)\" has neither \"auth\" nor \"username\" and \"password\" (identity tokens are not supported)")
            }
        }
        return found
    }

    /// `https://host:port/v1/` or `host:port` → `host:port`, lower-cased.
    static func authority(_ key: String) -> String {
        var text = Substring(key.lowercased())
        if let scheme = text.range(of: "://") { text = text[scheme.upperBound...] }
        if let slash = text.firstIndex(of: "/") { text = text[..<slash] }
        return String(text)
    }
}
