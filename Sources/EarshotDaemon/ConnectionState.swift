import EarshotAssets
import EarshotSpeech
import EarshotSystem
import EarshotWire
import Foundation

/// Per-connection state the speech requests keep between frames: open sessions with the asset
/// leases they hold, and the Wyoming ASR transcription in progress. Sessions end (and their
/// leases go back) when they finish or when the connection closes.
final class ConnectionState: @unchecked Sendable {
    struct OpenSession {
        var session: AnalysisSession
        /// One per module, in module order.
        var moduleLeases: [AssetLease]
        /// The voice activity detector's.
        var vadLease: AssetLease
        var leases: [AssetLease] { moduleLeases + [vadLease] }
    }

    let owner: Int
    let channel: FrameChannel
    /// Session ids whose `finished` event went out: cleaned up by the connection's task.
    let finishedSessions: AsyncStream<String>
    private let finishedContinuation: AsyncStream<String>.Continuation
    private let lock = NSLock()
    private var sessions: [String: OpenSession] = [:]
    /// The Wyoming `transcribe` in progress.
    var wyoming: WyomingTranscription? {
        get { lock.withLock { storedWyoming } }
        set { lock.withLock { storedWyoming = newValue } }
    }
    private var storedWyoming: WyomingTranscription?
    private var requestsInFlight = 0

    /// A request is being served (until ``requestEnded()``).
    func requestStarted() { lock.withLock { requestsInFlight += 1 } }
    func requestEnded() { lock.withLock { requestsInFlight -= 1 } }

    /// Whether the connection has work in flight (a request, a session, a Wyoming
    /// transcription): such a connection is never closed as idle.
    var isBusy: Bool { lock.withLock { requestsInFlight > 0 || !sessions.isEmpty || storedWyoming != nil } }

    init(owner: Int, channel: FrameChannel) {
        self.owner = owner
        self.channel = channel
        (finishedSessions, finishedContinuation) = AsyncStream.makeStream(of: String.self)
    }

    func add(_ id: String, _ open: OpenSession) { lock.withLock { sessions[id] = open } }
    func session(_ id: String) -> AnalysisSession? { lock.withLock { sessions[id]?.session } }
    func open(_ id: String) -> OpenSession? { lock.withLock { sessions[id] } }
    /// Swaps a session's module leases; returns the old ones.
    func replaceModuleLeases(_ id: String, with leases: [AssetLease]) -> [AssetLease] {
        lock.withLock {
            let old = sessions[id]?.moduleLeases ?? []
            sessions[id]?.moduleLeases = leases
            return old
        }
    }
    func remove(_ id: String) -> OpenSession? { lock.withLock { sessions.removeValue(forKey: id) } }
    func removeAll() -> [OpenSession] {
        lock.withLock {
            defer { sessions = [:] }
            return Array(sessions.values)
        }
    }

    /// Called from a session's queue when it finished.
    func sessionFinished(_ id: String) { finishedContinuation.yield(id) }

    /// No more cleanups will be requested (the connection is closing).
    func endCleanups() { finishedContinuation.finish() }
}
