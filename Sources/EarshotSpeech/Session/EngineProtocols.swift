/// What the session layer needs from engines; the concrete engines conform in extensions.

/// A loaded model that transcribes a bounded stretch of audio in one call (Whisper-class).
public protocol SegmentTranscribing: Sendable {
    /// Blocking; at most ``maximumSegmentSeconds`` of 16 kHz mono audio.
    func transcribe(_ samples: [Float], sampleRate: Int) throws -> Transcription
    /// False once the model can no longer decode (its engine process ended): load it again.
    var isUsable: Bool { get }
}

/// A per-session incremental decoder (PocketSphinx): one utterance at a time.
public protocol StreamingDecoding: AnyObject, Sendable {
    func startUtterance() throws
    func process(_ samples: [Float]) throws
    /// The current hypothesis during an utterance (volatile results).
    func partial() -> Transcription?
    func endUtterance(alternatives: Int) throws -> Transcription
    /// Decodes a complete utterance in one call (more accurate than streaming it).
    func decodeWhole(_ samples: [Float], alternatives: Int) throws -> Transcription
}

/// Per-session voice activity detection that cuts a stream into speech segments.
public protocol SpeechSegmenting: AnyObject {
    func accept(_ samples: [Float]) throws
    /// Ends the current speech (end of input or finalize): its segment becomes available.
    func flush() throws
    func popSegments() -> [SpeechSegment]
    var isSpeech: Bool { get }
    /// The earliest input sample (counted from the first accepted) a segment not yet popped can
    /// start at; callers drop what lies before it. Must stay within a bounded distance of the input
    /// position.
    var pendingStart: Int64 { get }
    /// Audio samples the detector holds (memory diagnostics).
    var retainedSamples: Int { get }
}

extension SegmentTranscribing {
    /// Models that run in this process stay usable.
    public var isUsable: Bool { true }
}

extension WhisperModel: SegmentTranscribing {}
extension SileroDetector: SpeechSegmenting {}
