import EarshotSystem
import Foundation

/// Who is an admin on the daemon's Unix sockets (main and HTTP): root, the daemon's own user and
/// members of `[Daemon] AdminGroup`. TCP peers never are.
struct AdminPolicy: Sendable {
    let group: String
    let daemonUID: UInt32

    /// Blocking (group membership may ask NSS): call on the listener's queue or through
    /// ``BlockingWork``.
    func isAdmin(_ peer: PeerCredentials) -> Bool {
        peer.uid == 0 || peer.uid == daemonUID || PeerCredentials.user(peer.uid, isInGroup: group)
    }
}

extension PeerCredentials {
    /// The identity every TCP peer of a listener acts as: user `uid` with its primary group (no
    /// process). Blocking (it asks NSS): call while setting up.
    static func networkUser(_ uid: UInt32) -> PeerCredentials {
        PeerCredentials(pid: 0, uid: uid, gid: getpwuid(uid).map { $0.pointee.pw_gid } ?? uid)
    }
}
