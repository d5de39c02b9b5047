import Foundation

/// Switches one session's Whisper decodes to a single-threaded copy of its model once two of them
/// run at once (a long recording, whose segments decode side by side, one per core).
///
/// Measured on 2 cores with Whisper base: two 1-thread decodes side by side transcribe a 2.7 min
/// recording ~1.3× faster than two sharing one 2-thread ONNX Runtime pool (whose workers spin and
/// wait on each other), while a lone decode — what voice assistants and dictation send — is ~1.4×
/// faster with 2 threads. So a session starts on the multi-threaded model; the first time its
/// decodes overlap, the copy is acquired from the model cache in the background (decodes go on
/// with the session's model until it is ready), and from then on every decode of the session uses
/// it. The copy is released with the session (``close()``), as its retention says.
final class BatchLanes: @unchecked Sendable {
    // Unchecked: `inFlight` and `state` are guarded by `lock`.
    private let lock = NSLock()
    private var inFlight = 0
    private var state = State.idle
    private var loading: Task<Void, Never>?
    private let acquire: @Sendable () async throws -> any SegmentTranscribing
    private let release: @Sendable () async -> Void

    private enum State {
        case idle, loading, failed, closed
        case ready(any SegmentTranscribing)
    }

    /// `acquire` loads (or shares) the single-threaded model; `release` gives it back.
    init(acquire: @escaping @Sendable () async throws -> any SegmentTranscribing, release: @escaping @Sendable () async -> Void) {
        self.acquire = acquire
        self.release = release
    }

    /// A decode of the session starts: the model it should use (nil: the session's own). Pair
    /// with ``end()``.
    func begin() -> (any SegmentTranscribing)? {
        lock.withLock {
            inFlight += 1
            switch state {
            case .ready(let copy): return copy
            case .idle where inFlight > 1:
                state = .loading
                loading = Task { await load() }
                return nil
            default: return nil
            }
        }
    }

    func end() { lock.withLock { inFlight -= 1 } }

    /// Returns once a copy being loaded is ready (or failed to load).
    func settled() async {
        await lock.withLock { loading }?.value
    }

    /// The session ended: the copy goes back to the cache, once loaded if it is loading.
    func close() async {
        await settled()
        let held = lock.withLock {
            defer { state = .closed }
            if case .ready = state { return true }
            return false
        }
        if held { await release() }
    }

    private func load() async {
        // Should the copy not load, decodes simply stay on the session's model.
        let copy = try? await acquire()
        let giveBack = lock.withLock {
            guard let copy else {
                if case .loading = state { state = .failed }
                return false
            }
            if case .closed = state { return true }
            state = .ready(copy)
            return false
        }
        if giveBack { await release() }
    }
}
