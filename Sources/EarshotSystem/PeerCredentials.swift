#if canImport(Glibc)
import Glibc
#endif

/// The process on the other end of a Unix socket, from `SO_PEERCRED` (kernel-verified).
public struct PeerCredentials: Sendable, Hashable, Codable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
    public init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }

    /// Reads the credentials of the peer of a connected Unix socket.
    public static func of(socket fd: Int32) throws(SystemError) -> PeerCredentials {
        // struct ucred {pid_t pid; uid_t uid; gid_t gid;} — Glibc hides it behind _GNU_SOURCE.
        var raw: (Int32, UInt32, UInt32) = (0, 0, 0)
        var length = socklen_t(MemoryLayout.size(ofValue: raw))
        try systemCall("getsockopt(SO_PEERCRED)") { getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &raw, &length) }
        return PeerCredentials(pid: raw.0, uid: raw.1, gid: raw.2)
    }

    /// Whether `uid` is a member of the group `name` (primary or supplementary).
    public static func user(_ uid: UInt32, isInGroup name: String) -> Bool {
        guard let group = getgrnam(name) else { return false }
        let gid = group.pointee.gr_gid
        guard let pw = getpwuid(uid) else { return false }
        if pw.pointee.pw_gid == gid { return true }
        var count: Int32 = 64
        var groups = [gid_t](repeating: 0, count: Int(count))
        if getgrouplist(pw.pointee.pw_name, pw.pointee.pw_gid, &groups, &count) == -1 {
            groups = [gid_t](repeating: 0, count: Int(count))
            guard getgrouplist(pw.pointee.pw_name, pw.pointee.pw_gid, &groups, &count) != -1 else { return false }
        }
        return groups.prefix(Int(count)).contains(gid)
    }
}
