import EarshotWire

/// Requests and replies between earshotd and its engine process (`earshot-engine`), which runs the
/// sherpa-onnx engines (Whisper, silero VAD) so ONNX Runtime's memory leaves with it. Every
/// request carries an `id` its reply repeats and the `object` (a loaded model or detector) it is
/// about; audio travels as the payload, 32-bit float samples in the host's byte order (both ends
/// are the same machine). Not a client protocol: the link is a socket pair to a child process.

/// The link's frame limits: the largest request is one decode (≤ 29.5 s, earshotd checks the
/// rate, ≤ 1 MHz, so ≤ 118 MB of samples).
public enum EngineLink {
    public static let limits = FrameLimits(maxHeaderBytes: 64 << 10, maxDataBytes: 16 << 20, maxPayloadBytes: 128 << 20)
}

/// Loads a Whisper model (`engine.whisper-load`); answered by ``EngineLoaded`` or ``EngineFailure``.
public struct EngineWhisperLoad: WireEvent, Hashable {
    public static let eventType = "engine.whisper-load"
    public var id: String
    public var object: String
    public var encoder: String
    public var decoder: String
    public var tokens: String
    /// Whisper language code, empty for identification by a multilingual model.
    public var language: String
    public var task: String
    public var threads: Int
    /// Feature frames of silence (10 ms each) the decoder appends after each audio, 0…``maxTailFrames``
    /// (nil: ``defaultTailFrames``): Whisper needs some after speech to write end-of-text.
    public var tailFrames: Int?

    /// The tail the decoder appends unless told otherwise: 10 s (sherpa-onnx's). On 4476 words
    /// (`Benchmarks/quantization.sh --variants-only int8 --tails 600,800`) 6 s read fewer words
    /// wrong (base 420 against 431, tiny.en 524 against 540; 8 s 429 and 531) 4–5 % faster, but
    /// `contextualStringsReadRareNames` reads 6 names of 8 with it, under the goal
    /// (measured again with the test's audio fixed: base copies "Tadhg" to the text's start);
    /// 3 s made base loop on a 10 s reading (139 errors in 12 words).
    public static let defaultTailFrames = 1000
    /// The longest tail: 20 s.
    public static let maxTailFrames = 2000

    public init(id: String, object: String, encoder: String, decoder: String, tokens: String, language: String, task: String, threads: Int,
                tailFrames: Int? = nil) {
        self.id = id
        self.object = object
        self.encoder = encoder
        self.decoder = decoder
        self.tokens = tokens
        self.language = language
        self.task = task
        self.threads = threads
        self.tailFrames = tailFrames
    }
}

/// Loads a silero voice activity detector (`engine.vad-load`).
public struct EngineVADLoad: WireEvent, Hashable {
    public static let eventType = "engine.vad-load"
    public var id: String
    public var object: String
    public var model: String
    public var threshold: Double
    public var minSilenceDuration: Double
    public var minSpeechDuration: Double
    public var maxSpeechDuration: Double
    public var windowSize: Int
    public var sampleRate: Int
    /// Seconds of audio sherpa-onnx's detector buffers (at most ``maxBufferSeconds``).
    public var bufferSeconds: Double

    /// The longest buffer the engine accepts: earshotd asks for its hard segment limit plus 4 s
    /// (≤ 32.5 s). It bounds the segment copy sherpa-onnx makes on every step, which the engine's
    /// allocator keeps on the heap (`EngineServer.mmapThreshold`).
    public static let maxBufferSeconds: Double = 40

    public init(id: String, object: String, model: String, threshold: Double, minSilenceDuration: Double, minSpeechDuration: Double,
                maxSpeechDuration: Double, windowSize: Int, sampleRate: Int, bufferSeconds: Double) {
        self.id = id
        self.object = object
        self.model = model
        self.threshold = threshold
        self.minSilenceDuration = minSilenceDuration
        self.minSpeechDuration = minSpeechDuration
        self.maxSpeechDuration = maxSpeechDuration
        self.windowSize = windowSize
        self.sampleRate = sampleRate
        self.bufferSeconds = bufferSeconds
    }
}

/// A load succeeded (`engine.loaded`).
public struct EngineLoaded: WireEvent, Hashable {
    public static let eventType = "engine.loaded"
    public var id: String
    /// Growth of the engine process's resident memory while it loaded (and warmed up) the object.
    public var memoryBytes: Int

    public init(id: String, memoryBytes: Int) {
        self.id = id
        self.memoryBytes = memoryBytes
    }
}

/// Decodes the payload's samples with a loaded Whisper model (`engine.whisper-decode`); answered
/// by ``EngineWhisperResult``. Decodes on one model may run concurrently. Every option is
/// optional: absent, the load's language and task and the decoder's defaults apply.
public struct EngineWhisperDecode: WireEvent, Hashable {
    public static let eventType = "engine.whisper-decode"
    public var id: String
    public var object: String
    public var sampleRate: Int
    /// Whisper language code; empty: identify the language (multilingual models).
    public var language: String?
    /// `transcribe` or `translate`.
    public var task: String?
    /// Beams at temperature 0 (1: greedy), 1…``maxBeamSize``.
    public var beamSize: Int?
    /// Temperatures tried in turn, each in [0, 1] (`[0]`: no fallback).
    public var temperatures: [Double]?
    /// A user's prompt: text the decode continues from (its last ``DecodingOptions/maxPromptTokens``
    /// tokens; what goes is reported as `promptTokensDropped`).
    public var prompt: String?
    /// The recording's earlier text (`ConditionOnPreviousText`): its last tokens fill what
    /// ``prompt`` and ``context`` leave of ``DecodingOptions/maxPromptTokens``, as faster-whisper
    /// takes the end of the text since its last reset; never counted as dropped.
    public var previousText: String?
    /// Phrases the decode is biased towards (and which join the prompt).
    public var context: [String]?
    /// Alternative texts wanted besides the best (from the beam), 0…``maxBeamSize`` − 1.
    public var alternatives: Int?
    /// True: ``previousText`` follows in an ``EngineWhisperPreviousText`` naming this decode's
    /// `id`; the engine computes the features and encodes the audio meanwhile, and searches once
    /// it has the text.
    public var previousTextFollows: Bool?

    /// The widest beam a decode may ask for.
    public static let maxBeamSize = DecodingOptions.maxBeamSize

    public init(id: String, object: String, sampleRate: Int, language: String? = nil, task: String? = nil, beamSize: Int? = nil,
                temperatures: [Double]? = nil, prompt: String? = nil, previousText: String? = nil, context: [String]? = nil, alternatives: Int? = nil,
                previousTextFollows: Bool? = nil) {
        self.id = id
        self.object = object
        self.sampleRate = sampleRate
        self.language = language
        self.task = task
        self.beamSize = beamSize
        self.temperatures = temperatures
        self.prompt = prompt
        self.previousText = previousText
        self.context = context
        self.alternatives = alternatives
        self.previousTextFollows = previousTextFollows
    }
}

/// The earlier text of a decode sent with ``EngineWhisperDecode/previousTextFollows``
/// (`engine.whisper-previous-text`), `decode` being that request's `id`; answered by
/// ``EngineWhisperPreviousTextTaken`` (or an ``EngineFailure`` when no decode waits for it).
public struct EngineWhisperPreviousText: WireEvent, Hashable {
    public static let eventType = "engine.whisper-previous-text"
    public var id: String
    public var decode: String
    /// Nil: the decode goes without earlier text.
    public var text: String?

    public init(id: String, decode: String, text: String?) {
        self.id = id
        self.decode = decode
        self.text = text
    }
}

/// The decode named by an ``EngineWhisperPreviousText`` has its text
/// (`engine.whisper-previous-text-taken`).
public struct EngineWhisperPreviousTextTaken: WireEvent, Hashable {
    public static let eventType = "engine.whisper-previous-text-taken"
    public var id: String

    public init(id: String) { self.id = id }
}

/// What a Whisper decode returned (`engine.whisper-result`): the text and, per token, its text,
/// start, duration and log probability; with the decoder's measures of the result.
public struct EngineWhisperResult: WireEvent, Hashable {
    public static let eventType = "engine.whisper-result"
    public var id: String
    public var text: String
    /// The language code the model reported, if any.
    public var language: String?
    public var tokens: [String]
    public var starts: [Double]
    public var durations: [Double]?
    public var logProbabilities: [Double]?
    /// Token ids of the text (OpenAI `verbose_json` `tokens`).
    public var tokenIDs: [Int]?
    /// Average log probability of the text's tokens and end-of-text.
    public var averageLogProbability: Double?
    /// Probability that the audio holds no speech.
    public var noSpeechProbability: Double?
    /// The text's length over its zlib-compressed length (high: it repeats itself).
    public var compressionRatio: Double?
    /// The temperature whose result was kept.
    public var temperature: Double?
    /// The identified language's probability (when the language was identified).
    public var languageProbability: Double?
    /// Other texts the beam found, most probable first.
    public var alternatives: [EngineWhisperAlternative]?
    /// Prompt tokens dropped from the front to fit the model's bound.
    public var promptTokensDropped: Int?

    public init(id: String, text: String, language: String?, tokens: [String], starts: [Double], durations: [Double]?, logProbabilities: [Double]?,
                tokenIDs: [Int]? = nil, averageLogProbability: Double? = nil, noSpeechProbability: Double? = nil, compressionRatio: Double? = nil,
                temperature: Double? = nil, languageProbability: Double? = nil, alternatives: [EngineWhisperAlternative]? = nil,
                promptTokensDropped: Int? = nil) {
        self.id = id
        self.text = text
        self.language = language
        self.tokens = tokens
        self.starts = starts
        self.durations = durations
        self.logProbabilities = logProbabilities
        self.tokenIDs = tokenIDs
        self.averageLogProbability = averageLogProbability
        self.noSpeechProbability = noSpeechProbability
        self.compressionRatio = compressionRatio
        self.temperature = temperature
        self.languageProbability = languageProbability
        self.alternatives = alternatives
        self.promptTokensDropped = promptTokensDropped
    }
}

/// Another text a beam search found for the same audio.
public struct EngineWhisperAlternative: Codable, Sendable, Hashable {
    public var text: String
    public var averageLogProbability: Double

    public init(text: String, averageLogProbability: Double) {
        self.text = text
        self.averageLogProbability = averageLogProbability
    }
}

/// Steps of a detector (`engine.vad-step`): `accept` the payload's samples, `stepSamples` at a
/// time (one step for all of them when 0), `flush` the speech in progress, or `reset` to a new
/// stream. Answered by ``EngineVADState``.
public struct EngineVADStep: WireEvent, Hashable {
    public static let eventType = "engine.vad-step"
    public enum Action: String, Codable, Sendable, Hashable {
        case accept, flush, reset
    }
    public var id: String
    public var object: String
    public var action: Action
    public var stepSamples: Int

    public init(id: String, object: String, action: Action, stepSamples: Int = 0) {
        self.id = id
        self.object = object
        self.action = action
        self.stepSamples = stepSamples
    }
}

/// What each step of an ``EngineVADStep`` did (`engine.vad-state`), in order.
public struct EngineVADState: WireEvent, Hashable {
    public static let eventType = "engine.vad-state"
    /// The segments sherpa-onnx's detector finished during one step, as `[start, count]` sample
    /// pairs, and whether it is inside speech after it.
    public struct Step: Codable, Sendable, Hashable {
        public var segments: [[Int64]]
        public var detected: Bool
        public init(segments: [[Int64]], detected: Bool) {
            self.segments = segments
            self.detected = detected
        }
    }
    public var id: String
    public var steps: [Step]

    public init(id: String, steps: [Step]) {
        self.id = id
        self.steps = steps
    }
}

/// Frees a loaded object (`engine.release`); answered by ``EngineReleased``.
public struct EngineRelease: WireEvent, Hashable {
    public static let eventType = "engine.release"
    public var id: String
    public var object: String

    public init(id: String, object: String) {
        self.id = id
        self.object = object
    }
}

/// An object was freed (`engine.released`).
public struct EngineReleased: WireEvent, Hashable {
    public static let eventType = "engine.released"
    public var id: String

    public init(id: String) { self.id = id }
}

/// A request failed (`engine.error`).
public struct EngineFailure: WireEvent, Hashable {
    public static let eventType = "engine.error"
    public enum Kind: String, Codable, Sendable, Hashable {
        /// sherpa-onnx returned no object for the configuration.
        case loadFailed = "load_failed"
        /// The request names no loaded object, or is malformed.
        case invalidRequest = "invalid_request"
    }
    public var id: String
    public var kind: Kind
    public var message: String

    public init(id: String, kind: Kind, message: String) {
        self.id = id
        self.kind = kind
        self.message = message
    }
}

/// 32-bit float samples as the engine link's payload bytes, and back.
public enum EngineSamples {
    /// The bytes of `samples` (an array or a slice of one: copied once).
    public static func bytes<Samples: Collection<Float>>(_ samples: Samples) -> [UInt8] {
        samples.withContiguousStorageIfAvailable { Array(UnsafeRawBufferPointer($0)) } ?? Array(samples).withUnsafeBytes { Array($0) }
    }

    /// The samples in `bytes` (a trailing partial sample is ignored).
    public static func samples(_ bytes: [UInt8]) -> [Float] {
        var samples = [Float](repeating: 0, count: bytes.count / MemoryLayout<Float>.size)
        samples.withUnsafeMutableBytes { target in
            bytes.withUnsafeBytes { source in target.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[0..<target.count])) }
        }
        return samples
    }
}
