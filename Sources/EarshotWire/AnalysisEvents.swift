/// Analysis session events (`earshot.analyzer.*`). A session is one input timeline analysed by N
/// modules with one result stream each. See Docs/PROTOCOL.md.

/// How long loaded models stay in memory after a session (Apple's `ModelRetention`).
public enum ModelRetention: String, Codable, Sendable, Hashable, CaseIterable {
    /// Released when no session uses them.
    case whileInUse
    /// Kept for `LingerSeconds` so another compatible session can reuse them.
    case lingering
    /// Kept while the client's connection lives.
    case processLifetime
}

/// What a session's audio is (Earshot extension).
public enum AnalysisInput: String, Codable, Sendable, Hashable, CaseIterable {
    /// Audio as it happens (a microphone, a voice assistant): each utterance is decoded when it ends.
    case live
    /// A whole recording sent as fast as the daemon takes it (a file): Whisper decodes consecutive
    /// utterances together, up to `[Analysis] RecordingWindowSec`, which is more accurate and faster;
    /// each utterance still gets its own final result, later than with `live`.
    case recording
}

/// Session options (Apple's `SpeechAnalyzer.Options`).
public struct AnalysisOptions: Codable, Sendable, Hashable {
    public var modelRetention: ModelRetention
    /// Admitted beyond `MaxConcurrentAnalyses`, up to the hard cap.
    public var ignoresResourceLimits: Bool
    /// With `lingering` retention only: how long the session's models stay loaded after it, instead
    /// of `LingerSeconds` (replacing what this user's earlier sessions asked for; 0: unload them as
    /// soon as no session uses them). The daemon caps it at `MaxKeepAliveSec` and says so in
    /// ``AnalyzerOpened``.
    public var keepAliveSeconds: Double?
    /// Live audio (the default) or a whole recording.
    public var input: AnalysisInput
    /// How Whisper decodes the session (Earshot extension; absent: the daemon's defaults).
    public var decoding: DecodingOptions?
    public init(modelRetention: ModelRetention = .whileInUse, ignoresResourceLimits: Bool = false, keepAliveSeconds: Double? = nil, input: AnalysisInput = .live,
                decoding: DecodingOptions? = nil) {
        self.modelRetention = modelRetention
        self.ignoresResourceLimits = ignoresResourceLimits
        self.keepAliveSeconds = keepAliveSeconds
        self.input = input
        self.decoding = decoding
    }
    enum CodingKeys: String, CodingKey {
        case modelRetention = "model_retention", ignoresResourceLimits = "ignores_resource_limits", keepAliveSeconds = "keep_alive_seconds", input, decoding
    }
    /// A keep-alive must be a finite number of seconds ≥ 0 and needs `lingering` retention, else
    /// decoding fails (the daemon answers `bad_request`).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        modelRetention = try c.decodeIfPresent(ModelRetention.self, forKey: .modelRetention) ?? .whileInUse
        ignoresResourceLimits = try c.decodeIfPresent(Bool.self, forKey: .ignoresResourceLimits) ?? false
        keepAliveSeconds = try c.decodeIfPresent(Double.self, forKey: .keepAliveSeconds)
        input = try c.decodeIfPresent(AnalysisInput.self, forKey: .input) ?? .live
        decoding = try c.decodeIfPresent(DecodingOptions.self, forKey: .decoding)
        if let problem = keepAliveProblem {
            throw DecodingError.dataCorruptedError(forKey: .keepAliveSeconds, in: c, debugDescription: problem)
        }
        if let problem = decoding?.problem {
            throw DecodingError.dataCorruptedError(forKey: .decoding, in: c, debugDescription: problem)
        }
    }

    /// Why ``keepAliveSeconds`` cannot be honoured, nil when it can (or is absent).
    public var keepAliveProblem: String? {
        guard let seconds = keepAliveSeconds else { return nil }
        guard seconds.isFinite, seconds >= 0 else { return "a keep-alive must be a finite number of seconds ≥ 0, not \(seconds)" }
        guard modelRetention == .lingering else { return "a keep-alive needs model_retention lingering, not \(modelRetention.rawValue)" }
        return nil
    }
}

/// Words and phrases to bias recognition towards (Apple's `AnalysisContext.contextualStrings`),
/// keyed by tag (e.g. `general`).
public struct AnalysisContextData: Codable, Sendable, Hashable {
    public var contextualStrings: [String: [String]]
    public init(contextualStrings: [String: [String]] = [:]) { self.contextualStrings = contextualStrings }
    enum CodingKeys: String, CodingKey { case contextualStrings = "contextual_strings" }
    /// Every tag's strings, tags in name order.
    public var allStrings: [String] { contextualStrings.keys.sorted().flatMap { contextualStrings[$0] ?? [] } }
}

/// How Whisper decodes a session's speech (Earshot extension). A decoding option an engine cannot
/// honour (PocketSphinx takes none) is reported in ``UnhonoredRequest``; a value out of range is a
/// `bad_request`.
public struct DecodingOptions: Codable, Sendable, Hashable {
    /// Text every decode of the session continues (OpenAI's `prompt`): names, spellings, style.
    /// Whisper keeps its last 223 tokens; a longer prompt loses its oldest text, and says so.
    public var prompt: String?
    /// Beams for final results, 1 (greedy) … ``maxBeamSize``; volatile results stay greedy.
    public var beamSize: Int?
    /// Sampling temperature in [0, 1]: 0 (or absent) decodes by search and raises the temperature
    /// only when a result fails Whisper's checks; above 0, every decode samples at it.
    public var temperature: Double?

    /// The widest beam a session may ask for.
    public static let maxBeamSize = 16
    /// The longest prompt accepted (its last ``maxPromptTokens`` tokens are used).
    public static let maxPromptCharacters = 16384
    /// Prompt tokens Whisper takes (OpenAI's bound: half its 448-token context, less one).
    public static let maxPromptTokens = 223

    public init(prompt: String? = nil, beamSize: Int? = nil, temperature: Double? = nil) {
        self.prompt = prompt
        self.beamSize = beamSize
        self.temperature = temperature
    }

    enum CodingKeys: String, CodingKey { case prompt, beamSize = "beam_size", temperature }

    /// Why these options cannot be honoured, nil when they can.
    public var problem: String? {
        if let beamSize, !(1...Self.maxBeamSize).contains(beamSize) { return "beam_size must be 1…\(Self.maxBeamSize), not \(beamSize)" }
        if let temperature, !(temperature.isFinite && (0...1).contains(temperature)) { return "temperature must lie in [0, 1], not \(temperature)" }
        if let prompt, prompt.count > Self.maxPromptCharacters { return "a prompt is at most \(Self.maxPromptCharacters) characters" }
        if let prompt, prompt.unicodeScalars.contains(where: { $0.properties.generalCategory == .control && !"\n\t\r".unicodeScalars.contains($0) }) {
            return "a prompt is text: it may not hold control characters"
        }
        return nil
    }

    /// The options as a session asks for them, nil when it asks for nothing.
    public var isEmpty: Bool { prompt == nil && beamSize == nil && temperature == nil }
}

/// Something a module of a session asked for that its engine does not do, reported instead of
/// silently dropped (Earshot extension: Apple's modules have no such report).
public struct UnhonoredRequest: Codable, Sendable, Hashable {
    /// What kind of request it was.
    public enum Kind: String, Codable, Sendable, Hashable {
        case transcriptionOption = "transcription_option"
        /// A word of the session's contextual strings.
        case contextualString = "contextual_string"
        /// One of the session's ``DecodingOptions``.
        case decodingOption = "decoding_option"
    }
    /// Index of the module in the session's module list.
    public var module: Int
    public var kind: Kind
    /// The option's name, or the contextual string or word.
    public var value: String
    /// Why it is not honoured.
    public var reason: String
    public init(module: Int, kind: Kind, value: String, reason: String) {
        self.module = module
        self.kind = kind
        self.value = value
        self.reason = reason
    }
}

/// A PCM format the analyzer accepts.
public struct AudioFormatSpec: Codable, Sendable, Hashable {
    public var rate: Int
    public var width: Int
    public var channels: Int
    /// `s16le`.
    public var encoding: String
    public init(rate: Int, width: Int, channels: Int, encoding: String = "s16le") {
        self.rate = rate
        self.width = width
        self.channels = channels
        self.encoding = encoding
    }
    /// 16 kHz mono signed 16-bit little-endian: what every Earshot engine analyses.
    public static let speech16k = AudioFormatSpec(rate: 16000, width: 2, channels: 1)
}

/// `earshot.analyzer.open`: start a session with `modules`.
public struct AnalyzerOpen: WireEvent, Hashable {
    public static let eventType = "earshot.analyzer.open"
    public var id: String?
    public var modules: [ModuleConfiguration]
    public var options: AnalysisOptions
    public var context: AnalysisContextData
    public init(id: String? = nil, modules: [ModuleConfiguration], options: AnalysisOptions = AnalysisOptions(), context: AnalysisContextData = AnalysisContextData()) {
        self.id = id
        self.modules = modules
        self.options = options
        self.context = context
    }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decodeIfPresent(String.self, forKey: .id)
        modules = try c.decode([ModuleConfiguration].self, forKey: .modules)
        options = try c.decodeIfPresent(AnalysisOptions.self, forKey: .options) ?? AnalysisOptions()
        context = try c.decodeIfPresent(AnalysisContextData.self, forKey: .context) ?? AnalysisContextData()
    }
}

/// `earshot.analyzer.progress`: the open request `id` waits for a free analysis slot, `position`
/// in the queue (1: next). Sent before its `earshot.analyzer.open.result` (clients that do not
/// know it ignore it, as every `*.progress` event).
public struct AnalyzerProgress: WireEvent, Hashable {
    public static let eventType = "earshot.analyzer.progress"
    public var id: String?
    public var position: Int
    public init(id: String?, position: Int) {
        self.id = id
        self.position = position
    }
}

/// `earshot.analyzer.open.result`: the session id and the audio format(s) to send.
public struct AnalyzerOpened: WireEvent, Hashable {
    public static let eventType = "earshot.analyzer.open.result"
    public var id: String?
    public var session: String
    /// Best first.
    public var audioFormats: [AudioFormatSpec]
    /// What the modules asked for that their engines do not do (empty: everything is honoured).
    public var unhonored: [UnhonoredRequest]
    /// The keep-alive granted, when the open asked for one and the session has shared models to
    /// keep (absent for PocketSphinx dictation, whose decoder is the session's own).
    public var keepAliveSeconds: Double?
    /// True when the daemon's `MaxKeepAliveSec` cut the requested keep-alive to ``keepAliveSeconds``.
    public var keepAliveClamped: Bool?
    public init(id: String?, session: String, audioFormats: [AudioFormatSpec], unhonored: [UnhonoredRequest] = [],
                keepAliveSeconds: Double? = nil, keepAliveClamped: Bool? = nil) {
        self.id = id
        self.session = session
        self.audioFormats = audioFormats
        self.unhonored = unhonored
        self.keepAliveSeconds = keepAliveSeconds
        self.keepAliveClamped = keepAliveClamped
    }
    enum CodingKeys: String, CodingKey {
        case id, session, audioFormats = "audio_formats", unhonored, keepAliveSeconds = "keep_alive_seconds", keepAliveClamped = "keep_alive_clamped"
    }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decodeIfPresent(String.self, forKey: .id)
        session = try c.decode(String.self, forKey: .session)
        audioFormats = try c.decode([AudioFormatSpec].self, forKey: .audioFormats)
        unhonored = try c.decodeIfPresent([UnhonoredRequest].self, forKey: .unhonored) ?? []
        keepAliveSeconds = try c.decodeIfPresent(Double.self, forKey: .keepAliveSeconds)
        keepAliveClamped = try c.decodeIfPresent(Bool.self, forKey: .keepAliveClamped)
    }
}

/// `earshot.analyzer.audio`: PCM in the payload, in the session's format. `start` places it on the
/// timeline (discontiguous input); without it the chunk follows the previous one. No reply: a
/// problem finishes the session with an error.
public struct AnalyzerAudio: WireEvent, Hashable {
    public static let eventType = "earshot.analyzer.audio"
    public var session: String
    public var rate: Int
    public var width: Int
    public var channels: Int
    public var start: WireTime?
    public init(session: String, format: AudioFormatSpec, start: WireTime? = nil) {
        self.session = session
        rate = format.rate
        width = format.width
        channels = format.channels
        self.start = start
    }
}

/// How a session ends (Apple's finish methods).
public enum FinishMode: String, Codable, Sendable, Hashable {
    /// `finalizeAndFinish(through:)`: finalize up to `time`, then finish.
    case finalizeThrough
    /// `finalizeAndFinishThroughEndOfInput()`: finalize everything received, then finish.
    case finalizeThroughEndOfInput
    /// `cancelAndFinishNow()`: drop pending work and finish at once.
    case cancelNow
    /// `finish(after:)`: finish once input reaches `time` (finalizing up to it).
    case after
}

/// Session control requests: finalize, finish, cancel-before, prepare. Each gets a
/// `earshot.analyzer.control.result` when done.
public struct AnalyzerControl: WireEvent, Hashable {
    public static let eventType = "earshot.analyzer.control"
    public var id: String?
    public var session: String
    /// `finalize`, `finish`, `cancel-before`, `prepare`, `set-context`, `set-modules`.
    public var action: String
    public var time: WireTime?
    public var mode: FinishMode?
    public var context: AnalysisContextData?
    public var modules: [ModuleConfiguration]?
    public init(id: String? = nil, session: String, action: String, time: WireTime? = nil, mode: FinishMode? = nil, context: AnalysisContextData? = nil, modules: [ModuleConfiguration]? = nil) {
        self.id = id
        self.session = session
        self.action = action
        self.time = time
        self.mode = mode
        self.context = context
        self.modules = modules
    }
}

/// `earshot.analyzer.control.result`.
public struct AnalyzerControlDone: WireEvent, Hashable {
    public static let eventType = "earshot.analyzer.control.result"
    public var id: String?
    public var session: String
    /// The time of the last sample consumed so far, if any.
    public var lastSampleTime: WireTime?
    /// `set-context` and `set-modules`: what the session's modules now ask for that their engines
    /// do not do (the whole list, replacing the one reported before).
    public var unhonored: [UnhonoredRequest]?
    public init(id: String?, session: String, lastSampleTime: WireTime?, unhonored: [UnhonoredRequest]? = nil) {
        self.id = id
        self.session = session
        self.lastSampleTime = lastSampleTime
        self.unhonored = unhonored
    }
    enum CodingKeys: String, CodingKey { case id, session, lastSampleTime = "last_sample_time", unhonored }
}

/// A run of text with its audio time range and confidence, when asked for.
public struct TextRun: Codable, Sendable, Hashable {
    public var text: String
    public var range: WireTimeRange?
    public var confidence: Double?
    public init(text: String, range: WireTimeRange? = nil, confidence: Double? = nil) {
        self.text = text
        self.range = range
        self.confidence = confidence
    }
}

/// `earshot.analyzer.result`: one module's assertion about a range of audio. Volatile results are
/// replaced by later results for overlapping ranges; final ones are not.
public struct AnalyzerResult: WireEvent, Hashable {
    public static let eventType = "earshot.analyzer.result"
    public var session: String
    /// Index of the module in the session's module list.
    public var module: Int
    public var range: WireTimeRange
    /// Results from this module are final up to (not including) this time.
    public var finalizationTime: WireTime
    public var isFinal: Bool
    /// Runs that make up the text (one run when no attributes were asked for).
    public var runs: [TextRun]
    /// Alternative interpretations, most likely first.
    public var alternatives: [String]
    /// Detector results: whether the range holds speech.
    public var speechDetected: Bool?
    /// BCP-47 language the engine identified in this range (modules with locale `und`), or the
    /// language it transcribed in when it reports one.
    public var language: String?
    /// True on a final result whose range holds speech (the detector found it) that the engine gave
    /// no text for, even decoded again: speech lost, not silence. Absent otherwise.
    public var speechWithoutText: Bool?
    /// Whisper's measures of a final result (Earshot extension; absent for other engines).
    public var decoding: DecodeReport?
    public init(session: String, module: Int, range: WireTimeRange, finalizationTime: WireTime, isFinal: Bool, runs: [TextRun], alternatives: [String] = [], speechDetected: Bool? = nil, language: String? = nil,
                speechWithoutText: Bool? = nil, decoding: DecodeReport? = nil) {
        self.session = session
        self.module = module
        self.range = range
        self.finalizationTime = finalizationTime
        self.isFinal = isFinal
        self.runs = runs
        self.alternatives = alternatives
        self.speechDetected = speechDetected
        self.language = language
        self.speechWithoutText = speechWithoutText
        self.decoding = decoding
    }
    enum CodingKeys: String, CodingKey {
        case session, module, range, finalizationTime = "finalization_time", isFinal = "is_final", runs, alternatives
        case speechDetected = "speech_detected", language, speechWithoutText = "speech_without_text", decoding
    }
    /// The runs' text joined.
    public var text: String { runs.map(\.text).joined() }
}

/// How sure Whisper's decoder was of a result, as OpenAI's `verbose_json` segments say it.
public struct DecodeReport: Codable, Sendable, Hashable {
    /// Average log probability of the decode's text tokens and end-of-text.
    public var averageLogProbability: Double
    /// Probability that the decoded audio held no speech.
    public var noSpeechProbability: Double
    /// Text length over its zlib-compressed length (above 2.4 the text repeats itself).
    public var compressionRatio: Double
    /// The temperature whose result was kept (0: search; above: the fallback sampled).
    public var temperature: Double
    /// The result's token ids.
    public var tokens: [Int]
    /// The identified language's probability (when the language was identified).
    public var languageProbability: Double?
    /// Prompt tokens dropped from the front to fit Whisper's 223 (absent: none).
    public var promptTokensDropped: Int?

    public init(averageLogProbability: Double, noSpeechProbability: Double, compressionRatio: Double, temperature: Double, tokens: [Int],
                languageProbability: Double? = nil, promptTokensDropped: Int? = nil) {
        self.averageLogProbability = averageLogProbability
        self.noSpeechProbability = noSpeechProbability
        self.compressionRatio = compressionRatio
        self.temperature = temperature
        self.tokens = tokens
        self.languageProbability = languageProbability
        self.promptTokensDropped = promptTokensDropped
    }

    enum CodingKeys: String, CodingKey {
        case averageLogProbability = "avg_logprob", noSpeechProbability = "no_speech_prob", compressionRatio = "compression_ratio", temperature, tokens
        case languageProbability = "language_probability", promptTokensDropped = "prompt_tokens_dropped"
    }
}

/// `earshot.analyzer.volatile-range`: the range whose results may still change (nil: none).
public struct AnalyzerVolatileRange: WireEvent, Hashable {
    public static let eventType = "earshot.analyzer.volatile-range"
    public var session: String
    public var range: WireTimeRange?
    public init(session: String, range: WireTimeRange?) {
        self.session = session
        self.range = range
    }
}

/// `earshot.analyzer.finished`: the session ended; every result stream ends. `error` when it ended
/// because of one.
public struct AnalyzerFinished: WireEvent, Hashable {
    public static let eventType = "earshot.analyzer.finished"
    public var session: String
    public var error: ErrorEvent?
    public init(session: String, error: ErrorEvent? = nil) {
        self.session = session
        self.error = error
    }
}

/// `earshot.end-retention`: unload every model no session uses (Apple's `SpeechModels.endRetention()`).
public struct EndRetentionRequest: WireEvent, Hashable {
    public static let eventType = "earshot.end-retention"
    public var id: String?
    public init(id: String? = nil) { self.id = id }
}

/// `earshot.end-retention.result`: how many models stay loaded (in use by sessions).
public struct EndRetentionReply: WireEvent, Hashable {
    public static let eventType = "earshot.end-retention.result"
    public var id: String?
    public var modelsLoaded: Int
    public init(id: String?, modelsLoaded: Int) {
        self.id = id
        self.modelsLoaded = modelsLoaded
    }
    enum CodingKeys: String, CodingKey { case id, modelsLoaded = "models_loaded" }
}
