/// What kind of analysis module an asset serves.
public enum AssetKind: String, Codable, Sendable, CaseIterable, Hashable {
    /// Modern neural speech-to-text (`SpeechTranscriber`).
    case transcriber
    /// Dictation-style recognition with custom vocabulary (`DictationTranscriber`).
    case dictation
    /// Voice activity detection (`SpeechDetector`), language-independent.
    case detector
}

/// A module as a client describes it: never an asset, always what it needs. The daemon resolves it
/// to the catalog asset(s) that can serve it.
public struct ModuleConfiguration: Codable, Sendable, Hashable {
    public var kind: AssetKind
    /// BCP-47 locale; `nil` for language-independent modules (detectors).
    public var locale: String?
    /// Preset name (e.g. `transcription`, `progressiveTranscription`), if any.
    public var preset: String?
    public var transcriptionOptions: [String]
    public var reportingOptions: [String]
    public var attributeOptions: [String]
    /// Content hints (e.g. `shortForm`, `farField`, `customizedLanguage`).
    public var contentHints: [String]
    /// Detectors: `low`, `medium` or `high`.
    public var sensitivity: String?
    /// Dictation: the caller's prepared custom language model to interpolate with the base model.
    public var languageModel: LanguageModelUse?

    public init(kind: AssetKind, locale: String?, preset: String? = nil, transcriptionOptions: [String] = [], reportingOptions: [String] = [], attributeOptions: [String] = [], contentHints: [String] = [], sensitivity: String? = nil,
                languageModel: LanguageModelUse? = nil) {
        self.kind = kind
        self.locale = locale
        self.preset = preset
        self.transcriptionOptions = transcriptionOptions
        self.reportingOptions = reportingOptions
        self.attributeOptions = attributeOptions
        self.contentHints = contentHints
        self.sensitivity = sensitivity
        self.languageModel = languageModel
    }

    /// The transcription option that asks for speech translated into English (beyond Apple).
    public static let translateOption = "translate"

    enum CodingKeys: String, CodingKey {
        case kind, locale, preset
        case transcriptionOptions = "transcription_options", reportingOptions = "reporting_options"
        case attributeOptions = "attribute_options", contentHints = "content_hints", sensitivity
        case languageModel = "language_model"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        kind = try c.decode(AssetKind.self, forKey: .kind)
        locale = try c.decodeIfPresent(String.self, forKey: .locale)
        preset = try c.decodeIfPresent(String.self, forKey: .preset)
        transcriptionOptions = try c.decodeIfPresent([String].self, forKey: .transcriptionOptions) ?? []
        reportingOptions = try c.decodeIfPresent([String].self, forKey: .reportingOptions) ?? []
        attributeOptions = try c.decodeIfPresent([String].self, forKey: .attributeOptions) ?? []
        contentHints = try c.decodeIfPresent([String].self, forKey: .contentHints) ?? []
        sensitivity = try c.decodeIfPresent(String.self, forKey: .sensitivity)
        languageModel = try c.decodeIfPresent(LanguageModelUse.self, forKey: .languageModel)
    }
}

/// Whether a set of modules can run (Apple's `AssetInventory.Status`). Deliberately not
/// `Comparable`: switch on the cases.
public enum AssetStatus: String, Codable, Sendable, Hashable {
    /// No catalog asset can serve the configuration.
    case unsupported
    /// Assets are being downloaded or installed.
    case downloading
    /// Assets exist in the catalog but are not installed.
    case supported
    /// Everything needed is installed.
    case installed

    /// The status of several modules together: unsupported if any is, then downloading, then
    /// supported, else installed.
    public static func aggregate(_ statuses: [AssetStatus]) -> AssetStatus {
        for candidate in [AssetStatus.unsupported, .downloading, .supported] where statuses.contains(candidate) {
            return candidate
        }
        return .installed
    }
}

/// The engines this daemon runs, by the name a catalog asset gives in `engine`. A catalog may name
/// others (a newer daemon's): those assets install but never serve a session
/// (`SpeechError.unknownEngine`).
public enum EngineKind: String, Sendable, CaseIterable, Codable {
    /// Whisper (Earshot's decoder on ONNX Runtime; the name is the asset format's, kept from
    /// sherpa-onnx's export).
    case whisper = "sherpa-onnx-whisper"
    case pocketSphinx = "pocketsphinx"
    /// The silero voice activity detector (sherpa-onnx).
    case sileroVAD = "sherpa-onnx-silero-vad"

    /// Whether its sessions are cut into speech segments by voice activity detection, so its
    /// modules also need the detector asset.
    public var needsDetector: Bool { self != .sileroVAD }

    /// The name users read (`unhonored` reasons).
    public var displayName: String {
        switch self {
        case .whisper: "Whisper"
        case .pocketSphinx: "PocketSphinx"
        case .sileroVAD: "Silero VAD"
        }
    }
}
