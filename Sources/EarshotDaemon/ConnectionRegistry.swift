import EarshotSystem
import EarshotWire
import Foundation

/// Who may hold how many connections (`[Limits]` in the config).
struct ConnectionLimits: Sendable {
    /// Every connection together.
    var maxConnections: Int
    /// One non-admin uid's.
    var maxPerUser: Int
    /// Slots only admins may take.
    var adminReserved: Int

    /// What non-admin connections together may hold: at least one.
    var nonAdminSlots: Int { max(1, maxConnections - adminReserved) }
}

/// The daemon's open connections: counts for status, slot accounting (per uid, admin reserve), and
/// what shutdown needs to close them.
actor ConnectionRegistry {
    struct Entry {
        var channel: FrameChannel
        var peer: PeerCredentials
        var admin: Bool
        var appID: String?
        /// Requests being served.
        var inFlight = 0
    }

    private var entries: [Int: Entry] = [:]
    private var nextID = 1
    private(set) var total = 0
    private(set) var shuttingDown = false
    /// During shutdown: connections kept open while their sessions are being finished.
    private var keepOpen: @Sendable (Int) -> Bool = { _ in false }

    /// Open non-admin connections, in total and per uid.
    private var nonAdmin = 0
    private var perUser: [UInt32: Int] = [:]

    var count: Int { entries.count }

    /// Registers a connection, or says why not (`shuttingDown`, or `insufficientResources`: every
    /// slot taken, the non-admin slots taken, or this uid's cap reached; admins may use the
    /// reserved slots and have no per-uid cap).
    func add(_ channel: FrameChannel, peer: PeerCredentials, admin: Bool, limits: ConnectionLimits) -> Result<Int, WireError> {
        if shuttingDown { return .failure(.daemonShuttingDown) }
        if entries.count >= limits.maxConnections {
            return .failure(WireError(.insufficientResources, "too many connections (limit \(limits.maxConnections))"))
        }
        if !admin {
            if nonAdmin >= limits.nonAdminSlots {
                return .failure(WireError(.insufficientResources, "all \(limits.nonAdminSlots) connection slots for non-admin clients are in use (the other \(limits.maxConnections - limits.nonAdminSlots) are reserved for admins)"))
            }
            if perUser[peer.uid, default: 0] >= limits.maxPerUser {
                return .failure(WireError(.insufficientResources, "too many connections from uid \(peer.uid) (limit \(limits.maxPerUser) per user)"))
            }
            nonAdmin += 1
            perUser[peer.uid, default: 0] += 1
        }
        let id = nextID
        nextID += 1
        total += 1
        entries[id] = Entry(channel: channel, peer: peer, admin: admin)
        return .success(id)
    }

    func remove(_ id: Int) {
        guard let entry = entries.removeValue(forKey: id), !entry.admin else { return }
        nonAdmin -= 1
        let left = perUser[entry.peer.uid, default: 1] - 1
        perUser[entry.peer.uid] = left > 0 ? left : nil
    }

    func setAppID(_ appID: String, for id: Int) {
        entries[id]?.appID = appID
    }

    /// Counts a request as in flight; false when the daemon is shutting down (take no more).
    func beginRequest(_ id: Int) -> Bool {
        guard !shuttingDown else { return false }
        entries[id]?.inFlight += 1
        return true
    }

    /// A request finished; during shutdown an idle connection is then closed.
    func endRequest(_ id: Int) {
        guard var entry = entries[id] else { return }
        entry.inFlight -= 1
        entries[id] = entry
        if shuttingDown, entry.inFlight == 0, !keepOpen(id) { entry.channel.closeAfterFlush() }
    }

    /// Stops taking connections and requests: idle connections are closed now, busy ones after
    /// their requests; those `keepOpen` names (sessions being finished) stay until ``closeIdle()``.
    func beginShutdown(keepOpen: @escaping @Sendable (Int) -> Bool) {
        shuttingDown = true
        self.keepOpen = keepOpen
        closeIdle()
    }

    /// Closes (after flushing) every connection with no request in flight that `keepOpen` no
    /// longer holds.
    func closeIdle() {
        for (id, entry) in entries where entry.inFlight == 0 && !keepOpen(id) { entry.channel.closeAfterFlush() }
    }

    /// Closes every connection now (shutdown deadline passed).
    func closeAll() {
        for entry in entries.values { entry.channel.close() }
    }
}
