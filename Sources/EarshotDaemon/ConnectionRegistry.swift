import EarshotSystem
import Foundation

/// The daemon's open connections: counts for status, and what shutdown needs to close them.
actor ConnectionRegistry {
    struct Entry {
        var channel: FrameChannel
        var peer: PeerCredentials
        var appID: String?
        var busy = false
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

    /// Marks a connection as working on a request; returns false when it should stop (shutdown).
    func setBusy(_ id: Int, _ busy: Bool) -> Bool {
        entries[id]?.busy = busy
        return !shuttingDown
    }

    /// Stops taking requests: idle connections are closed now, busy ones after their request.
    func beginShutdown() {
        shuttingDown = true
        for entry in entries.values where !entry.busy { entry.channel.closeAfterFlush() }
    }

    /// Closes every connection now (shutdown deadline passed).
    func closeAll() {
        for entry in entries.values { entry.channel.close() }
    }
}
