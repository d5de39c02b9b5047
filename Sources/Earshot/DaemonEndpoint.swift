import EarshotSystem
#if canImport(Glibc)
import Glibc
#endif

/// Why a client would not talk to what it found at a socket path.
public enum DaemonEndpointError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Nothing usable answers at the path (missing, refused, …): try the next candidate.
    case unreachable(SystemError)
    /// The user socket's directory is not this user's own (``SocketLocations/checkUserSocketDirectory(environment:)``).
    case untrustedDirectory(SecureDirectoryError)
    /// The process listening at `path` runs as `uid`, which is not a trusted daemon uid.
    case untrustedPeer(path: String, uid: UInt32)

    public var description: String {
        switch self {
        case .unreachable(let error): "\(error)"
        case .untrustedDirectory(let error): "\(error)"
        case .untrustedPeer(let path, let uid): "the process at \(path) is owned by uid \(uid), not the Earshot daemon"
        }
    }
}

/// How a client reaches a daemon it can trust: the user socket's directories are checked before
/// connecting, and the listening process's credentials (`SO_PEERCRED`, kernel-verified) after,
/// before a single byte is sent.
public enum DaemonEndpoint {
    /// The system daemon's user when `$EARSHOT_DAEMON_USER` does not name another.
    public static let defaultServiceUser = "earshot"

    /// The uids a daemon may run as: root, this process's own (its user daemon), and the
    /// configured service user — `$EARSHOT_DAEMON_USER` (a name or a uid), else `earshot` (the
    /// system daemon's user, from sysusers.d), when it exists. Looks users up through NSS: blocking.
    public static func trustedUIDs(environment: [String: String]) -> Set<UInt32> {
        var uids = ownUIDs
        let name = environment["EARSHOT_DAEMON_USER"].flatMap { $0.isEmpty ? nil : $0 } ?? defaultServiceUser
        if let uid = UInt32(name) {
            uids.insert(uid)
        } else if let uid = lookUpUser(name) {
            uids.insert(uid)
        }
        return uids
    }

    /// Root and this process's own uids: trusted without a look-up.
    static var ownUIDs: Set<UInt32> { [0, getuid(), geteuid()] }

    /// Whether a daemon running as `uid` is trusted. Root's and this user's own daemons are known
    /// without asking NSS (which may load modules and query systemd-userdb: milliseconds at every
    /// connection); only another uid is looked up as the service user.
    public static func isTrusted(uid: UInt32, environment: [String: String]) -> Bool {
        ownUIDs.contains(uid) || trustedUIDs(environment: environment).contains(uid)
    }

    /// Connects to the daemon at `path` and returns the connected, non-blocking fd. With
    /// `checkUserDirectory` (the default user socket) the directories are checked first. Blocking
    /// (NSS look-ups, `lstat`): call it off the cooperative pool.
    public static func connect(path: String, checkUserDirectory: Bool, environment: [String: String]) throws(DaemonEndpointError) -> Int32 {
        if checkUserDirectory {
            let present: Bool
            do { present = try SocketLocations.checkUserSocketDirectory(environment: environment) } catch { throw .untrustedDirectory(error) }
            guard present else { throw .unreachable(SystemError("connect(\(path))", errno: ENOENT)) }
        }
        let fd: Int32
        do { fd = try UnixSocket.connect(path: path) } catch { throw .unreachable(error) }
        let peer: PeerCredentials
        do {
            peer = try PeerCredentials.of(socket: fd)
        } catch {
            close(fd)
            throw .unreachable(error)
        }
        guard isTrusted(uid: peer.uid, environment: environment) else {
            close(fd)
            throw .untrustedPeer(path: path, uid: peer.uid)
        }
        return fd
    }

    static func lookUpUser(_ name: String) -> UInt32? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        while true {
            let code = getpwnam_r(name, &entry, &buffer, buffer.count, &result)
            if code == ERANGE, buffer.count < 1 << 20 {
                buffer = [CChar](repeating: 0, count: buffer.count * 4)
                continue
            }
            guard code == 0, result != nil else { return nil }
            return entry.pw_uid
        }
    }
}
