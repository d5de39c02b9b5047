import EarshotSystem
import Foundation

/// What a connection keeps between frames beside its sessions (which the
/// ``AnalysisCoordinator`` holds): its channel, the requests being served and the Wyoming ASR
/// transcription in progress.
final class ConnectionState: @unchecked Sendable {
    // @unchecked: every stored var is only touched while holding `lock`.
    let channel: FrameChannel
    private let lock = NSLock()
    /// The Wyoming `transcribe` in progress.
    var wyoming: WyomingTranscription? {
        get { lock.withLock { storedWyoming } }
        set { lock.withLock { storedWyoming = newValue } }
    }
    private var storedWyoming: WyomingTranscription?
    private var requestsInFlight = 0

    init(channel: FrameChannel) {
        self.channel = channel
    }

    /// A request is being served (until ``requestEnded()``): the connection's one in-flight
    /// count, read by its idle check and by shutdown (``ConnectionRegistry``).
    func requestStarted() { lock.withLock { requestsInFlight += 1 } }
    func requestEnded() { lock.withLock { requestsInFlight -= 1 } }

    /// Requests being served.
    var requestCount: Int { lock.withLock { requestsInFlight } }

    /// Whether a request or a Wyoming transcription is in flight.
    var isBusy: Bool { lock.withLock { requestsInFlight > 0 || storedWyoming != nil } }
}
