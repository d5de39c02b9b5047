import EarshotSystem
import EarshotWire
import Foundation

/// The daemon's open connections: counts for status, slot accounting (per uid, admin reserve), and
/// what shutdown needs to close them.
actor ConnectionRegistry {
    struct Entry {
        var channel: FrameChannel
        var peer: PeerCredentials
        var slot: PeerSlots.Peer
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

    /// Slots held, per uid and per network address.
    private var slots: PeerSlots

    init(limits: ConnectionLimits) { slots = PeerSlots(limits: limits) }

    var count: Int { entries.count }

    /// Registers a connection, or says why not (`shuttingDown`, or `insufficientResources`: every
    /// slot taken, the non-admin slots taken, this uid's cap or this network address's cap reached;
    /// admins may use the reserved slots and have no per-uid cap). `host`: a network peer's address.
    func add(_ channel: FrameChannel, peer: PeerCredentials, admin: Bool, host: String? = nil) -> Result<Int, WireError> {
        if shuttingDown { return .failure(.daemonShuttingDown) }
        let slot: PeerSlots.Peer = host.map { .network(uid: peer.uid, host: $0) } ?? .local(uid: peer.uid, admin: admin)
        if let refusal = slots.admit(slot) { return .failure(refusal.wire) }
        let id = nextID
        nextID += 1
        total += 1
        entries[id] = Entry(channel: channel, peer: peer, slot: slot)
        return .success(id)
    }

    func remove(_ id: Int) {
        guard let entry = entries.removeValue(forKey: id) else { return }
        slots.release(entry.slot)
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
