import EarshotSystem
import EarshotWire
import Foundation

/// The daemon's open connections: counts for status, slot accounting (per uid, admin reserve), and
/// what shutdown needs to close them.
actor ConnectionRegistry {
    struct Entry {
        /// The connection's channel and its requests in flight.
        var state: ConnectionState
        var peer: PeerCredentials
        var slot: PeerSlots.Peer
        var appID: String?
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
    func add(_ state: ConnectionState, peer: PeerCredentials, admin: Bool, host: String? = nil) -> Result<Int, WireError> {
        if shuttingDown { return .failure(.daemonShuttingDown) }
        let slot: PeerSlots.Peer = host.map { .network(uid: peer.uid, host: $0) } ?? .local(uid: peer.uid, admin: admin)
        if let refusal = slots.admit(slot) { return .failure(refusal.wire) }
        let id = nextID
        nextID += 1
        total += 1
        entries[id] = Entry(state: state, peer: peer, slot: slot)
        return .success(id)
    }

    func remove(_ id: Int) {
        guard let entry = entries.removeValue(forKey: id) else { return }
        slots.release(entry.slot)
    }

    func setAppID(_ appID: String, for id: Int) {
        entries[id]?.appID = appID
    }

    /// Whether requests are still taken (false once shutdown began).
    var takesRequests: Bool { !shuttingDown }

    /// A request of connection `id` finished (its ``ConnectionState`` counted it): during shutdown
    /// an idle connection is then closed.
    func requestEnded(_ id: Int) {
        guard shuttingDown, let entry = entries[id], entry.state.requestCount == 0, !keepOpen(id) else { return }
        entry.state.channel.closeAfterFlush()
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
        for (id, entry) in entries where entry.state.requestCount == 0 && !keepOpen(id) { entry.state.channel.closeAfterFlush() }
    }

    /// Closes every connection now (shutdown deadline passed).
    func closeAll() {
        for entry in entries.values { entry.state.channel.close() }
    }
}
