import Dispatch
import EarshotAudio
import EarshotWire
import Foundation

/// A short recording decoded whole as soon as its input ends, while the detector still reads it.
///
/// A file arrives faster than real time, so at audio-stop silero has most of it still to step
/// through, and the one window its segments make cannot be decoded before it is done. This copy of
/// the input (at most one recording window, contiguous) is decoded at once instead; the session
/// keeps the result only when the detector's segments turn out to be that one window and leave
/// little of the input out, and otherwise decodes its window as usual once this decode is done.
/// Thread-safe.
final class RecordingSpeculation: @unchecked Sendable {
    // Unchecked: state is guarded by `lock`.
    private let lock = NSLock()
    /// The session module whose window this decode stands for, and its model.
    let module: Int
    private let model: any SegmentTranscribing
    private let maxSamples: Int
    /// Share of the input the detector must still have to read at audio-stop.
    private let minBacklog: Double
    private let queue: DispatchQueue
    /// False once the input can no longer be one speculative window: too long, discontiguous, in
    /// another format, cut, given to other modules, or continued after the decode started.
    private var viable = true
    private var pcm: [UInt8] = []
    /// Stream time just after the input so far.
    private var end: WireTime?
    /// Samples decoded (set when the decode starts).
    private var started: Int?
    private var outcome: Result<Transcription, any Error>?
    private var waiters: [@Sendable (Result<Transcription, any Error>) -> Void] = []

    init(id: String, module: Int, model: any SegmentTranscribing, maxSamples: Int, minBacklog: Double) {
        self.module = module
        self.model = model
        self.maxSamples = maxSamples
        self.minBacklog = minBacklog
        queue = DispatchQueue(label: "earshot.session.\(id).speculation")
    }

    /// Keeps a copy of accepted input (s16le), while it can still be one window.
    func add(_ bytes: [UInt8], format: AudioFormatSpec, start: WireTime?) {
        lock.withLock {
            guard viable, started == nil, format == .speech16k, bytes.count % 2 == 0 else { return abandonLocked() }
            if let start, let end, start != end { return abandonLocked() }
            guard pcm.count + bytes.count <= 2 * maxSamples else { return abandonLocked() }
            pcm += bytes
            end = (start ?? end ?? .zero) + WireTime(value: Int64(bytes.count / 2), timescale: AnalysisSession.sampleRate)
        }
    }

    /// The input will not be decoded as one window (audio dropped, modules replaced).
    func abandon() { lock.withLock { abandonLocked() } }

    private func abandonLocked() {
        viable = false
        pcm = []
    }

    /// The input has ended for now, `queued` samples of it not yet read by the detector: decodes
    /// what was kept, on a lane of `window` (its samples reserved there), when that is at least
    /// `minBacklog` of it; otherwise gives up (input read already decodes as usual). Does nothing
    /// once started, or when there is nothing to decode.
    func inputEnded(queued: Int64, in window: DecodeWindow) {
        let bytes: [UInt8]? = lock.withLock {
            guard viable, started == nil, !pcm.isEmpty else { return nil }
            guard Double(queued) >= minBacklog * Double(pcm.count / 2) else {
                abandonLocked()
                return nil
            }
            started = pcm.count / 2
            defer { pcm = [] }
            return pcm
        }
        guard let bytes else { return }
        // `reserve` and `run` block: on this queue, never the caller's thread.
        queue.async { [self] in
            let samples: [Float]
            do { samples = try PCM.floats(fromLittleEndian: bytes, width: 2) } catch { return complete(.failure(error)) }
            window.reserve(samples: samples.count)
            window.transcribe(samples, with: model) { [self] in complete($0) }
        }
    }

    /// True (once) when the decode under way covers exactly the first `consumed` samples of the
    /// input: the window the session gathered from them may take its result.
    func claim(through consumed: Int64) -> Bool {
        lock.withLock {
            guard viable, let started, Int64(started) == consumed else { return false }
            viable = false
            return true
        }
    }

    /// Samples of input kept for a decode not yet started.
    var keptSamples: Int { lock.withLock { pcm.count / 2 } }

    /// True while a decode started and has not finished.
    var isDecoding: Bool { lock.withLock { started != nil && outcome == nil } }

    /// Runs `body` with the decode's outcome once it is done (now, if it is).
    func whenDone(_ body: @escaping @Sendable (Result<Transcription, any Error>) -> Void) {
        let done: Result<Transcription, any Error>? = lock.withLock {
            if outcome == nil { waiters.append(body) }
            return outcome
        }
        if let done { body(done) }
    }

    private func complete(_ result: Result<Transcription, any Error>) {
        let waiting = lock.withLock {
            outcome = result
            defer { waiters = [] }
            return waiters
        }
        waiting.forEach { $0(result) }
    }
}
