import EarshotWire
/// What an engine recognized in one stretch of audio. Times are seconds from the start of the
/// samples the engine was given; the session layer turns them into exact stream times.
public struct Transcription: Sendable, Hashable {
    public var text: String
    /// Words (or tokens) with times and confidences where the engine gives them.
    public var words: [RecognizedWord]
    /// Other likely transcriptions, best first, excluding `text`.
    public var alternatives: [String]
    /// Overall confidence in [0, 1], when known.
    public var confidence: Double?
    /// BCP-47 language of the speech, when the engine identified it.
    public var language: String?
    /// How sure the decoder was, as Whisper's decoders measure it (Whisper only).
    public var measures: DecodeReport?

    public init(text: String, words: [RecognizedWord] = [], alternatives: [String] = [], confidence: Double? = nil, language: String? = nil,
                measures: DecodeReport? = nil) {
        self.text = text
        self.words = words
        self.alternatives = alternatives
        self.confidence = confidence
        self.language = language
        self.measures = measures
    }
}

/// One recognized word.
public struct RecognizedWord: Sendable, Hashable {
    public var text: String
    /// Seconds from the start of the audio given to the engine.
    public var start: Double?
    public var end: Double?
    /// In [0, 1], when known.
    public var confidence: Double?
    /// The engine's token ids for the word (Whisper).
    public var tokens: [Int]

    public init(text: String, start: Double? = nil, end: Double? = nil, confidence: Double? = nil, tokens: [Int] = []) {
        self.text = text
        self.start = start
        self.end = end
        self.confidence = confidence
        self.tokens = tokens
    }
}

/// A stretch of speech found by voice activity detection.
public struct SpeechSegment: Sendable, Hashable {
    /// Index of the first sample in the stream given to the detector.
    public var startSample: Int64
    public var samples: [Float]

    public init(startSample: Int64, samples: [Float]) {
        self.startSample = startSample
        self.samples = samples
    }
}
