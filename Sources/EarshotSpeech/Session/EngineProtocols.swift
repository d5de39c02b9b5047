/// What the session layer needs from engines; the concrete engines conform in extensions.

/// A loaded model that transcribes a bounded stretch of audio in one call (Whisper-class).
public protocol SegmentTranscribing: Sendable {
    /// Blocking; at most ``maximumSegmentSeconds`` of 16 kHz mono audio. What `settings` leaves
    /// nil, the model's (or the session's) defaults decide.
    func transcribe(_ samples: [Float], sampleRate: Int, settings: DecodeSettings) throws -> Transcription
    /// The same, the recording's earlier text (``DecodeSettings/previousText``) still to come:
    /// `previousText` blocks until the decode before has passed it on. A model that can start
    /// without it (the engine process's Whisper: features and encoder) asks for it when it must;
    /// by default it is waited for first.
    func transcribe(_ samples: [Float], sampleRate: Int, settings: DecodeSettings, previousText: () -> String?) throws -> Transcription
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

    public func transcribe(_ samples: [Float], sampleRate: Int, settings: DecodeSettings, previousText: () -> String?) throws -> Transcription {
        var settings = settings
        settings.previousText = previousText()
        return try transcribe(samples, sampleRate: sampleRate, settings: settings)
    }

    /// A decode with the defaults.
    public func transcribe(_ samples: [Float], sampleRate: Int) throws -> Transcription {
        try transcribe(samples, sampleRate: sampleRate, settings: DecodeSettings())
    }
}

/// How one decode of a shared Whisper model runs. A model is loaded once whatever its sessions'
/// languages, tasks and searches: these travel with each decode. Nil: the default (the
/// session's, then the model's).
public struct DecodeSettings: Sendable, Hashable {
    /// Whisper language code; empty: identify the language.
    public var language: String?
    public var task: WhisperModel.Task?
    /// 1: greedy (volatile results); more: beam search.
    public var beamSize: Int?
    /// Temperatures tried in turn (fallback).
    public var temperatures: [Double]?
    /// The user's prompt: text the decode continues.
    public var prompt: String?
    /// The recording's earlier text (``AnalysisSession``'s previous-text conditioning): fills what
    /// the prompt leaves of Whisper's prompt tokens, its end kept.
    public var previousText: String?
    /// Phrases to bias the decode towards (contextual strings).
    public var context: [String]?
    /// Alternative texts wanted from the beam.
    public var alternatives: Int?

    public init(language: String? = nil, task: WhisperModel.Task? = nil, beamSize: Int? = nil, temperatures: [Double]? = nil,
                prompt: String? = nil, previousText: String? = nil, context: [String]? = nil, alternatives: Int? = nil) {
        self.language = language
        self.task = task
        self.beamSize = beamSize
        self.temperatures = temperatures
        self.prompt = prompt
        self.previousText = previousText
        self.context = context
        self.alternatives = alternatives
    }

    /// These settings with what they leave nil taken from `defaults`.
    public func over(_ defaults: DecodeSettings) -> DecodeSettings {
        DecodeSettings(language: language ?? defaults.language, task: task ?? defaults.task, beamSize: beamSize ?? defaults.beamSize,
                       temperatures: temperatures ?? defaults.temperatures, prompt: prompt ?? defaults.prompt,
                       previousText: previousText ?? defaults.previousText, context: context ?? defaults.context,
                       alternatives: alternatives ?? defaults.alternatives)
    }
}

extension WhisperModel: SegmentTranscribing {}
extension SileroDetector: SpeechSegmenting {}
