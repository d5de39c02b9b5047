/// Standard Wyoming events (Wyoming 1.7+), kept compatible with unmodified Wyoming peers.

/// `describe`: asks the server what it offers; answered by ``Info``.
public struct Describe: WireEvent, Hashable {
    public static let eventType = "describe"
    public init() {}
}

/// Who made a program or model.
public struct Attribution: Codable, Sendable, Hashable {
    public var name: String
    public var url: String
    public init(name: String, url: String) {
        self.name = name
        self.url = url
    }
}

/// One speech-to-text model in ``Info``.
public struct AsrModel: Codable, Sendable, Hashable {
    public var name: String
    public var attribution: Attribution
    public var installed: Bool
    public var description: String?
    public var version: String?
    /// Languages as BCP-47 tags.
    public var languages: [String]
    public init(name: String, attribution: Attribution, installed: Bool, description: String?, version: String?, languages: [String]) {
        self.name = name
        self.attribution = attribution
        self.installed = installed
        self.description = description
        self.version = version
        self.languages = languages
    }
}

/// A speech-to-text program in ``Info``.
public struct AsrProgram: Codable, Sendable, Hashable {
    public var name: String
    public var attribution: Attribution
    public var installed: Bool
    public var description: String?
    public var version: String?
    public var models: [AsrModel]
    public var supportsTranscriptStreaming: Bool
    public init(name: String, attribution: Attribution, installed: Bool, description: String?, version: String?, models: [AsrModel], supportsTranscriptStreaming: Bool) {
        self.name = name
        self.attribution = attribution
        self.installed = installed
        self.description = description
        self.version = version
        self.models = models
        self.supportsTranscriptStreaming = supportsTranscriptStreaming
    }
    enum CodingKeys: String, CodingKey {
        case name, attribution, installed, description, version, models
        case supportsTranscriptStreaming = "supports_transcript_streaming"
    }
}

/// `info`: what the server offers. Earshot fills `asr` only; the other Wyoming lists stay empty.
public struct Info: WireEvent, Hashable {
    public static let eventType = "info"
    public var asr: [AsrProgram]
    public var tts: [JSONValue] = []
    public var handle: [JSONValue] = []
    public var intent: [JSONValue] = []
    public var wake: [JSONValue] = []
    public var mic: [JSONValue] = []
    public var snd: [JSONValue] = []
    public init(asr: [AsrProgram]) { self.asr = asr }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        asr = try c.decodeIfPresent([AsrProgram].self, forKey: .asr) ?? []
        for (key, path) in [(CodingKeys.tts, \Info.tts), (.handle, \.handle), (.intent, \.intent), (.wake, \.wake), (.mic, \.mic), (.snd, \.snd)] {
            self[keyPath: path] = try c.decodeIfPresent([JSONValue].self, forKey: key) ?? []
        }
    }
    enum CodingKeys: String, CodingKey { case asr, tts, handle, intent, wake, mic, snd }
}

/// `ping`: liveness check, answered by ``Pong`` with the same text.
public struct Ping: WireEvent, Hashable {
    public static let eventType = "ping"
    public var text: String?
    public init(text: String? = nil) { self.text = text }
}

/// `pong`: the answer to ``Ping``.
public struct Pong: WireEvent, Hashable {
    public static let eventType = "pong"
    public var text: String?
    public init(text: String? = nil) { self.text = text }
}

/// `error`: a failure, with a stable ``ErrorCode`` and the `id` of the request it answers.
public struct ErrorEvent: WireEvent, Hashable {
    public static let eventType = "error"
    public var text: String
    public var code: ErrorCode?
    public var id: String?
    public init(text: String, code: ErrorCode?, id: String? = nil) {
        self.text = text
        self.code = code
        self.id = id
    }
    public init(_ error: WireError, id: String? = nil) {
        self.init(text: error.message, code: error.code, id: id)
    }
    /// The error as a throwable value (code `internalError` when the peer sent none).
    public var wireError: WireError { WireError(code ?? .internalError, text) }
}

/// PCM format fields shared by the audio events.
public struct AudioFormatFields: Codable, Sendable, Hashable {
    /// Samples per second.
    public var rate: Int
    /// Bytes per sample (2 for s16le).
    public var width: Int
    /// Interleaved channels.
    public var channels: Int
    public init(rate: Int, width: Int, channels: Int) {
        self.rate = rate
        self.width = width
        self.channels = channels
    }
}

/// `audio-start`: a PCM stream begins.
public struct AudioStart: WireEvent, Hashable {
    public static let eventType = "audio-start"
    public var rate: Int
    public var width: Int
    public var channels: Int
    /// Milliseconds since the stream's epoch.
    public var timestamp: Int64?
    public init(format: AudioFormatFields, timestamp: Int64? = nil) {
        rate = format.rate
        width = format.width
        channels = format.channels
        self.timestamp = timestamp
    }
    public var format: AudioFormatFields { AudioFormatFields(rate: rate, width: width, channels: channels) }
}

/// `audio-chunk`: PCM samples in the frame payload.
public struct AudioChunk: WireEvent, Hashable {
    public static let eventType = "audio-chunk"
    public var rate: Int
    public var width: Int
    public var channels: Int
    public var timestamp: Int64?
    public init(format: AudioFormatFields, timestamp: Int64? = nil) {
        rate = format.rate
        width = format.width
        channels = format.channels
        self.timestamp = timestamp
    }
    public var format: AudioFormatFields { AudioFormatFields(rate: rate, width: width, channels: channels) }
}

/// `audio-stop`: the PCM stream ended.
public struct AudioStop: WireEvent, Hashable {
    public static let eventType = "audio-stop"
    public var timestamp: Int64?
    public init(timestamp: Int64? = nil) { self.timestamp = timestamp }
}

/// `transcribe`: asks for a transcript of the audio that follows.
public struct Transcribe: WireEvent, Hashable {
    public static let eventType = "transcribe"
    /// Model name from ``Info``; the daemon picks one when absent.
    public var name: String?
    /// BCP-47 language.
    public var language: String?
    /// Names that should bias the transcription (people, places); taken before the terms.
    public var transcriptNames: [String]?
    /// Domain terms that should bias the transcription.
    public var transcriptTerms: [String]?
    public init(name: String? = nil, language: String? = nil, transcriptNames: [String]? = nil, transcriptTerms: [String]? = nil) {
        self.name = name
        self.language = language
        self.transcriptNames = transcriptNames
        self.transcriptTerms = transcriptTerms
    }
    enum CodingKeys: String, CodingKey { case name, language, transcriptNames = "transcript_names", transcriptTerms = "transcript_terms" }

    /// The names, then the terms: the session's contextual strings.
    public var biasPhrases: [String] { (transcriptNames ?? []) + (transcriptTerms ?? []) }
}

/// `transcript`: the final text of a transcription.
public struct Transcript: WireEvent, Hashable {
    public static let eventType = "transcript"
    public var text: String
    public var language: String?
    public init(text: String, language: String? = nil) {
        self.text = text
        self.language = language
    }
}

/// `transcript-start`: a streaming transcript begins.
public struct TranscriptStart: WireEvent, Hashable {
    public static let eventType = "transcript-start"
    public var language: String?
    public init(language: String? = nil) { self.language = language }
}

/// `transcript-chunk`: more text of a streaming transcript.
public struct TranscriptChunk: WireEvent, Hashable {
    public static let eventType = "transcript-chunk"
    public var text: String
    public init(text: String) { self.text = text }
}

/// `transcript-stop`: a streaming transcript ended (after the full ``Transcript``).
public struct TranscriptStop: WireEvent, Hashable {
    public static let eventType = "transcript-stop"
    public init() {}
}
