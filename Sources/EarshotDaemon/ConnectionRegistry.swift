import EarshotSystem
import Foundation

/// The daemon's open connections: counts for status, and what shutdown needs to close them.
actor ConnectionRegistry {
    struct Entry {
        var channel: FrameChannel
        var peer: PeerCredentials
        var appID: String?
        /// Requests being served.
        var inFlight = 0
    }

    private var entries: [Int: Entry] = [:]
    private var nextID = 1
    private(set) var total = 0
    private(set) var shuttingDown = false

    var count: Int { entries.count }

    /// Registers a connection; `nil` when the daemon is shutting down or `limit` is reached.
    func add(_ channel: FrameChannel, peer: PeerCredentials, limit: Int) -> Int? {
        guard !shuttingDown, entries.count < limit else { return nil }
        let id = nextID
        nextID += 1
        total += 1
        entries[id] = Entry(channel: channel, peer: peer)
        return id
    }

    func remove(_ id: Int) {
        entries[id] = nil
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
        if shuttingDown, entry.inFlight == 0 { entry.channel.closeAfterFlush() }
    }

    /// Stops taking requests: idle connections are closed now, busy ones after their requests.
    func beginShutdown() {
        shuttingDown = true
        for entry in entries.values where entry.inFlight == 0 { entry.channel.closeAfterFlush() }
    }

    /// Closes every connection now (shutdown deadline passed).
    func closeAll() {
        for entry in entries.values { entry.channel.close() }
    }
}
