import EarshotEngineLink
import EarshotSystem
import EarshotWire
import Foundation

/// How readily voice activity detection calls audio speech.
public enum VoiceSensitivity: String, Sendable, Hashable, CaseIterable {
    /// Speech probability threshold 0.65: only clear speech (noisy rooms).
    case low
    /// Threshold 0.5, silero's recommended default.
    case medium
    /// Threshold 0.35: also quiet or distant speech.
    case high

    /// The silero speech-probability threshold for this sensitivity.
    public var threshold: Float {
        switch self {
        case .low: 0.65
        case .medium: 0.5
        case .high: 0.35
        }
    }
}

/// Voice activity detection with silero VAD (sherpa-onnx C API, in the ``EngineProcess``) for
/// one audio stream: feed 16 kHz mono samples as they come, take the finished speech segments.
///
/// Every segment is at most ``Configuration/hardLimit`` seconds long, so each fits one Whisper
/// decode, and long speech is split without losing audio: sherpa-onnx ends a segment that passes
/// `maxSpeechDuration` at the next dip of speech probability (it raises the threshold to 0.9 and
/// the minimum silence to 0.1 s), and drops the samples between that cut and the next segment's
/// start; this detector prepends them to the next segment. Speech that never dips is cut at
/// `hardLimit`, at the quietest 20 ms in the last 3 s, and the rest carried into the next segment.
///
/// Blocking (each 32 ms window runs the model; one call to the engine process per 1 s of input,
/// per 0.1 s where a forced cut may be due): use it on a dedicated thread. All methods are
/// serialized by an internal lock, so the detector may move between threads; they throw
/// ``SherpaOnnxError/engineUnavailable(_:)`` once the engine process is gone. It holds at most
/// about `hardLimit` + 7 s of audio (~2.3 MB with the defaults), however long the stream.
public final class SileroDetector: @unchecked Sendable {
    // @unchecked: every stored var and the engine's detector are only touched while holding `lock`.

    /// Detector settings.
    public struct Configuration: Sendable, Hashable {
        /// The installed model (`Scripts/setup.sh` builds it from PyPI silero-vad).
        public static let defaultModelPath = "/usr/local/share/earshot/assets/silero_vad.onnx"

        public var modelPath: String
        public var sensitivity: VoiceSensitivity
        /// Silence that ends a segment, in seconds.
        public var minSilenceDuration: Double
        /// Shortest speech that opens a segment, in seconds.
        public var minSpeechDuration: Double
        /// Length after which sherpa-onnx looks for a split point, in seconds.
        public var maxSpeechDuration: Double
        /// Longest segment this detector emits, in seconds (below ``WhisperModel/maximumDuration``).
        public var hardLimit: Double
        /// Audio added before and after each segment, in seconds (never overlapping a neighbour).
        /// silero marks speech from where it is confident, which clips soft onsets ("he…"); a
        /// recognizer needs the margin, a speech/no-speech report does not.
        public var speechPadding: Double

        public init(modelPath: String = Configuration.defaultModelPath, sensitivity: VoiceSensitivity = .medium,
                    minSilenceDuration: Double = 0.5, minSpeechDuration: Double = 0.25,
                    maxSpeechDuration: Double = 20, hardLimit: Double = 28, speechPadding: Double = 0) {
            self.modelPath = modelPath
            self.sensitivity = sensitivity
            self.minSilenceDuration = minSilenceDuration
            self.minSpeechDuration = minSpeechDuration
            self.maxSpeechDuration = maxSpeechDuration
            self.hardLimit = hardLimit
            self.speechPadding = speechPadding
        }

        /// Defaults with 0.4 s of padding: segments meant for a recognizer (on the LibriVox
        /// long-form test, Whisper tiny.en's WER is 8.5 % without padding, 4.9 % with it).
        public static let transcription = Configuration(speechPadding: 0.4)
    }

    /// The only rate silero VAD accepts.
    public static let sampleRate = 16000
    /// silero (v5/v6) window; sherpa-onnx runs the model on it plus 64 samples of context.
    static let window = 512
    /// Samples fed to sherpa-onnx per step, so segments surface promptly whatever the chunk size.
    static let step = 1600
    /// Steps sent to the engine process in one call when no forced cut can fall among them (1 s).
    static let stepsPerCall = 10
    /// Quietest-point search span and frame for forced cuts.
    static let cutSearch = 3 * 16000
    static let cutFrame = 320

    /// A finished segment and, inside it, the stretch detected as speech (the segment without its
    /// padding), both in input samples.
    public struct DetectedSpeech: Sendable, Hashable {
        public var segment: SpeechSegment
        public var speech: Range<Int64>
    }

    public let configuration: Configuration

    private let lock = NSLock()
    private let vad: EngineObject
    private let hardLimitSamples: Int64
    private let lengthSplitSamples: Int
    /// sherpa-onnx starts a segment up to this many samples before it reports speech.
    private let lookback: Int64
    /// Longest gap after a split that is filled from ``history`` rather than treated as a pause.
    private let maxGap: Int64
    private let padding: Int64

    private var accepted: Int64 = 0
    private var detected = false
    /// Earliest sample the segment in progress can start at, while speech is detected.
    private var onset: Int64?
    /// Recent input: `history[0]` is sample `historyStart`.
    private var history: [Float] = []
    private var historyStart: Int64 = 0
    /// After a split: the next segment must start at `start`; `[start, speechEnd)` is speech.
    private var lead: (start: Int64, speechEnd: Int64)?
    private var finished: [DetectedSpeech] = []
    private var emittedThrough: Int64 = 0

    /// Creates a detector in `engine`'s process (starting it if needed). Blocking (loads the
    /// model, a few milliseconds).
    public init(configuration: Configuration = Configuration(), engine: EngineProcess = .shared) throws(SherpaOnnxError) {
        let config = configuration
        guard FileManager.default.isReadableFile(atPath: config.modelPath) else { throw .missingFile(config.modelPath) }
        guard config.hardLimit > 1, config.hardLimit <= WhisperModel.maximumDuration - 1,
              config.maxSpeechDuration > 1, config.maxSpeechDuration < config.hardLimit,
              config.speechPadding >= 0, config.speechPadding <= 1 else {
            throw .invalidInput("need 1 < maxSpeechDuration < hardLimit ≤ \(WhisperModel.maximumDuration - 1) s, padding ≤ 1 s")
        }
        (vad, _) = try engine.load { name throws(SherpaOnnxError) in
            // Room for the longest segment plus sherpa-onnx's look-back.
            try EngineObject.frame(EngineVADLoad(
                id: "", object: name, model: config.modelPath, threshold: Double(config.sensitivity.threshold),
                minSilenceDuration: config.minSilenceDuration, minSpeechDuration: config.minSpeechDuration,
                maxSpeechDuration: config.maxSpeechDuration, windowSize: Self.window, sampleRate: Self.sampleRate,
                bufferSeconds: config.hardLimit + 4))
        }
        self.configuration = config
        let rate = Double(Self.sampleRate)
        hardLimitSamples = Int64(config.hardLimit * rate)
        lookback = Int64(2 * (Self.window + 64)) + Int64(config.minSpeechDuration * rate) + Int64(Self.step)
        // A segment sherpa-onnx split for length ends within 0.2 s (0.1 s minimum silence plus its
        // look-back) short of maxSpeechDuration.
        lengthSplitSamples = Int(config.maxSpeechDuration * rate) - Self.step * 2
        maxGap = Int64(1.5 * rate)
        padding = Int64(config.speechPadding * rate)
        LiveObjects.created("SileroDetector")
    }

    deinit { LiveObjects.destroyed("SileroDetector") }

    /// Whether the engine process holding the detector still runs.
    public var isUsable: Bool { vad.isUsable }

    /// Forgets the stream so far, as if newly created, keeping the loaded model: a finished
    /// session's detector serves the next session without the ~50 ms a new one takes to load.
    public func reset() throws(SherpaOnnxError) {
        lock.lock()
        defer { lock.unlock() }
        _ = try engineStep(.reset)
        accepted = 0
        detected = false
        onset = nil
        history = []
        historyStart = 0
        lead = nil
        finished = []
        emittedThrough = 0
    }

    /// Feeds 16 kHz mono samples in [-1, 1], any number at a time.
    public func accept(_ samples: [Float]) throws(SherpaOnnxError) {
        lock.lock()
        defer { lock.unlock() }
        var offset = 0
        while offset < samples.count {
            // Steps that cannot reach a forced cut go to the engine process in one round trip.
            let steps = min(Self.stepsPerCall, stepsBeforeACutCanBeDue)
            let end = min(offset + max(1, steps) * Self.step, samples.count)
            let states = try engineStep(.accept, samples[offset..<end]).steps
            guard states.count == (end - offset + Self.step - 1) / Self.step else {
                throw .engineUnavailable("it answered \(states.count) detector steps for \(end - offset) samples")
            }
            var from = offset
            for state in states {
                let to = min(from + Self.step, end)
                try step(samples[from..<to], state)
                from = to
            }
            offset = end
        }
    }

    /// Ends the input: the speech in progress becomes a segment.
    public func flush() throws(SherpaOnnxError) {
        lock.lock()
        defer { lock.unlock() }
        let segments = try engineStep(.flush).steps.flatMap(\.segments)
        // sherpa-onnx's flushed segment ends where its last full window did; the input goes on.
        drain(segments, forced: false, extendingTo: accepted)
        if let lead, lead.speechEnd > lead.start { emit(from: lead.start, to: lead.speechEnd) }
        lead = nil
        detected = false
        onset = nil
        // Everything so far is final: no later segment reaches back before the flush.
        emittedThrough = max(emittedThrough, accepted)
        trimHistory()
    }

    /// The segments finished since the last call, in order.
    public func popSegments() -> [SpeechSegment] {
        popDetectedSpeech().map(\.segment)
    }

    /// The segments finished since the last call with their unpadded speech ranges, in order
    /// (transcribe the segment, report the speech range).
    public func popDetectedSpeech() -> [DetectedSpeech] {
        lock.lock()
        defer { lock.unlock() }
        let detected = finished
        finished.removeAll()
        return detected
    }

    /// Whether the detector is inside speech now (a segment is open).
    public var isSpeech: Bool {
        lock.lock()
        defer { lock.unlock() }
        return detected
    }

    /// Audio samples this detector holds: its history plus finished segments not yet taken
    /// (memory diagnostics; bounded however long the stream).
    public var retainedSamples: Int {
        lock.lock()
        defer { lock.unlock() }
        return history.count + finished.reduce(0) { $0 + $1.segment.samples.count }
    }

    /// The earliest input sample a segment not yet emitted can start at: audio before it is never
    /// part of a later segment, so a caller may drop it. At most about `hardLimit` + 3.8 s behind
    /// ``samplesAccepted`` (during silence, `speechPadding` + 0.42 s).
    public var pendingStart: Int64 {
        lock.lock()
        defer { lock.unlock() }
        var from = accepted - lookback - padding
        if let onset { from = min(from, onset - padding) }
        if let lead { from = min(from, lead.start) }
        return max(from, emittedThrough, historyStart)
    }

    /// Samples accepted so far (the stream position).
    public var samplesAccepted: Int64 {
        lock.lock()
        defer { lock.unlock() }
        return accepted
    }

    // MARK: - Under the lock

    /// Steps of sherpa-onnx's detector in the engine process (``step`` samples each when
    /// accepting): what each did.
    private func engineStep(_ action: EngineVADStep.Action, _ samples: ArraySlice<Float> = []) throws(SherpaOnnxError) -> EngineVADState {
        let request = try EngineObject.frame(EngineVADStep(id: "", object: vad.name, action: action, stepSamples: Self.step),
                                             payload: EngineSamples.bytes(samples))
        return try vad.call(request, replying: EngineVADState.self).0
    }

    /// How many steps from here cannot make speech reach the hard limit (so no forced cut, the one
    /// thing a step does with the engine): every segment start a step can use is at or after the
    /// earliest open one, or at most 3 s before the input position (a newly detected onset, or a
    /// split's carried audio).
    private var stepsBeforeACutCanBeDue: Int {
        var earliest = accepted - lookback - padding - Int64(3 * Self.sampleRate)
        if let onset { earliest = min(earliest, onset - padding) }
        if let lead { earliest = min(earliest, lead.start) }
        let room = earliest + hardLimitSamples - accepted
        return room > 0 ? Int((room - 1) / Int64(Self.step)) : 0
    }

    /// Takes one step's result from the engine for `samples`.
    private func step(_ samples: ArraySlice<Float>, _ state: EngineVADState.Step) throws(SherpaOnnxError) {
        let before = accepted
        history.append(contentsOf: samples)
        accepted += Int64(samples.count)
        drain(state.segments, forced: false)

        detected = state.detected
        if detected, onset == nil { onset = max(0, before - lookback) }
        if !detected { onset = nil }

        // Speech that never dips: cut it before it outgrows one decode.
        if detected, let start = lead?.start ?? onset.map({ $0 - padding }), accepted - start >= hardLimitSamples {
            drain(try engineStep(.flush).steps.flatMap(\.segments), forced: true)
            onset = nil // sherpa-onnx opens the next segment where the flush ended; `lead` covers it
        }
        // A long pause after a split: the carried speech stands alone.
        if let lead, !detected, accepted - lead.speechEnd > maxGap + lookback {
            if lead.speechEnd > lead.start { emit(from: lead.start, to: lead.speechEnd) }
            self.lead = nil
        }
        trimHistory()
    }

    /// Takes sherpa-onnx's finished segments (`[start, count]`), joins any carried audio, and emits them.
    private func drain(_ segments: [[Int64]], forced: Bool, extendingTo inputEnd: Int64? = nil) {
        for segment in segments where segment.count == 2 {
            let found = segment[0]
            let count = segment[1]
            guard count > 0 else { continue }
            var start: Int64?
            if let lead {
                if found - lead.speechEnd <= maxGap, lead.start >= historyStart {
                    start = min(lead.start, found)
                } else if lead.speechEnd > lead.start {
                    emit(from: lead.start, to: lead.speechEnd)
                }
                self.lead = nil
            }
            let first = start ?? max(found - padding, emittedThrough, historyStart)
            let speechStart = start ?? found
            var end = found + count
            if let inputEnd, end >= inputEnd - Int64(Self.step) { end = inputEnd }
            if forced {
                let cut = quietestPoint(from: first, to: end)
                emit(from: first, to: cut, speechFrom: speechStart)
                lead = (cut, end)
            } else {
                let speechEnd = end
                end = min(end + padding, accepted)
                emit(from: first, to: end, speechFrom: speechStart, speechTo: speechEnd)
                if count >= lengthSplitSamples { lead = (end, end) }
            }
        }
    }

    /// Where to cut `[start, end)` so the first part is as long as possible but at most the hard
    /// limit: the middle of the quietest 20 ms frame in the last 3 s.
    private func quietestPoint(from start: Int64, to end: Int64) -> Int64 {
        let last = min(end, start + hardLimitSamples)
        let first = max(start + 1, last - Int64(Self.cutSearch), historyStart)
        var best = last
        var bestEnergy = Float.infinity
        var frame = first
        while frame + Int64(Self.cutFrame) <= last {
            let from = Int(frame - historyStart)
            var energy: Float = 0
            for index in from..<(from + Self.cutFrame) { energy += history[index] * history[index] }
            if energy < bestEnergy {
                bestEnergy = energy
                best = frame + Int64(Self.cutFrame / 2)
            }
            frame += Int64(Self.cutFrame)
        }
        return best
    }

    /// Emits `[requestedStart, end)` from ``history``; `speechFrom..<speechTo` (default: all of
    /// it) is the part detected as speech rather than padding.
    private func emit(from requestedStart: Int64, to end: Int64, speechFrom: Int64? = nil, speechTo: Int64? = nil) {
        // Never repeat audio already emitted (a flush extends past sherpa-onnx's own position).
        let start = max(requestedStart, emittedThrough, historyStart)
        guard end > start, end <= historyStart + Int64(history.count) else { return }
        let samples = Array(history[Int(start - historyStart)..<Int(end - historyStart)])
        let speechStart = min(max(speechFrom ?? start, start), end)
        let speechEnd = max(min(speechTo ?? end, end), speechStart)
        finished.append(DetectedSpeech(segment: SpeechSegment(startSample: start, samples: samples), speech: speechStart..<speechEnd))
        emittedThrough = end
    }

    /// Keeps what a segment may still need: the open segment (up to the hard limit), the carried
    /// audio after a split, and the last 3 s for forced cuts.
    private func trimHistory() {
        var keepFrom = accepted - Int64(Self.cutSearch) - lookback
        if let onset { keepFrom = min(keepFrom, onset - padding) }
        if let lead { keepFrom = min(keepFrom, lead.start) }
        keepFrom = max(keepFrom, accepted - hardLimitSamples - lookback - padding - Int64(Self.cutSearch))
        let drop = Int(keepFrom - historyStart)
        // Drop in large steps so trimming costs O(1) amortized per sample.
        if drop > 4 * Self.sampleRate {
            history.removeFirst(drop)
            historyStart += Int64(drop)
        }
    }
}
