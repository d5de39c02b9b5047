import EarshotWire
import Foundation

/// An analysis module (Apple's `SpeechModule`): what it needs is described by its configuration,
/// never by an asset name; it delivers its results through ``results``.
public protocol SpeechModule: AnyObject, Sendable {
    associatedtype Result: SpeechModuleResult, Sendable where Result == Results.Element
    associatedtype Results: AsyncSequence, Sendable where Results.Failure == any Error
    /// This module's results in the analyzer it is part of; ends when the session finishes.
    var results: Results { get }
    /// The formats this module can analyze, given its configuration.
    var availableCompatibleAudioFormats: [AVAudioFormat] { get async }
    /// The configuration the daemon resolves to assets.
    var moduleConfiguration: ModuleConfiguration { get }
}

extension SpeechModule {
    /// 16 kHz mono 16-bit PCM: what the daemon's engines analyse.
    public var availableCompatibleAudioFormats: [AVAudioFormat] {
        get async { [SpeechAnalyzer.analyzerFormat] }
    }
}

/// A module whose assets depend on a locale (Apple's `LocaleDependentSpeechModule`).
public protocol LocaleDependentSpeechModule: SpeechModule {
    /// The module's kind, for the static locale queries.
    static var assetKind: AssetKind { get }
    /// The locales this module was configured with.
    var selectedLocales: [Locale] { get }
}

extension LocaleDependentSpeechModule {
    /// Locales the daemon can serve for this module (installed or downloadable).
    public static var supportedLocales: [Locale] {
        get async { await LocaleQuery.locales(kind: assetKind, installed: false) }
    }

    /// Locales whose assets are installed.
    public static var installedLocales: [Locale] {
        get async { await LocaleQuery.locales(kind: assetKind, installed: true) }
    }

    /// The supported locale equivalent to `locale` (BCP-47 aware: `en_US`, `en-US-u-…` and, where
    /// only the language is served, `en` all match), or nil.
    public static func supportedLocale(equivalentTo locale: Locale) async -> Locale? {
        await EarshotService.answer("supportedLocale(equivalentTo:)", fallback: nil) {
            try await EarshotService.shared.request(LocalesRequest(kind: assetKind, equivalentTo: locale.identifier), expecting: LocalesReply.self)
                .locales.first.map { Locale(identifier: $0) }
        }
    }
}

enum LocaleQuery {
    /// Supported locales, or those of them whose assets are installed: a supported regional locale
    /// counts as installed when an asset for its language is (`en` serves `en-US`, as resolution
    /// decides), so `supportedLocale(equivalentTo:)`'s answer is found in `installedLocales`.
    static func locales(kind: AssetKind, installed: Bool) async -> [Locale] {
        await EarshotService.answer(installed ? "installedLocales" : "supportedLocales", fallback: []) {
            let supported = try await identifiers(kind: kind, installed: false)
            guard installed else { return supported.map { Locale(identifier: $0) } }
            let present = Set(try await identifiers(kind: kind, installed: true))
            return supported.filter { present.contains($0) || present.contains(String($0.prefix { $0 != "-" && $0 != "_" })) }.map { Locale(identifier: $0) }
        }
    }

    private static func identifiers(kind: AssetKind, installed: Bool) async throws -> [String] {
        try await EarshotService.shared.request(LocalesRequest(kind: kind, installed: installed), expecting: LocalesReply.self).locales
    }
}

/// Modern speech-to-text (Apple's `SpeechTranscriber`).
public final class SpeechTranscriber: LocaleDependentSpeechModule {
    public static let assetKind = AssetKind.transcriber

    public enum TranscriptionOption: String, CaseIterable, Hashable, Sendable {
        /// Replaces certain words and phrases with a redacted form.
        case etiquetteReplacements
        /// Text in English whatever the language spoken (Whisper's translate task; needs a
        /// multilingual model). Earshot extension.
        case translateToEnglish = "translate"
    }

    public enum ReportingOption: String, CaseIterable, Hashable, Sendable {
        /// Alternative transcriptions besides the most likely one.
        case alternativeTranscriptions
        /// Faster, less accurate results.
        case fastResults
        /// Tentative results for a range before the final one.
        case volatileResults
    }

    public enum ResultAttributeOption: String, CaseIterable, Hashable, Sendable {
        /// Time-code attributes on the transcription's runs.
        case audioTimeRange
        /// Confidence attributes on the transcription's runs.
        case transcriptionConfidence
    }

    /// A named bundle of options (Apple's preset matrix).
    public struct Preset: Hashable, Sendable {
        public var transcriptionOptions: Set<TranscriptionOption>
        public var reportingOptions: Set<ReportingOption>
        public var attributeOptions: Set<ResultAttributeOption>
        let name: String?

        public init(transcriptionOptions: Set<TranscriptionOption>, reportingOptions: Set<ReportingOption>, attributeOptions: Set<ResultAttributeOption>) {
            self.init(name: nil, transcriptionOptions, reportingOptions, attributeOptions)
        }

        init(name: String?, _ t: Set<TranscriptionOption>, _ r: Set<ReportingOption>, _ a: Set<ResultAttributeOption>) {
            self.name = name
            transcriptionOptions = t
            reportingOptions = r
            attributeOptions = a
        }

        /// Basic, accurate transcription.
        public static let transcription = Preset(name: "transcription", [], [], [])
        /// Transcription with editing suggestions.
        public static let transcriptionWithAlternatives = Preset(name: "transcriptionWithAlternatives", [], [.alternativeTranscriptions], [])
        /// With editing suggestions, cross-referenced to source audio.
        public static let timeIndexedTranscriptionWithAlternatives = Preset(name: "timeIndexedTranscriptionWithAlternatives", [], [.alternativeTranscriptions], [.audioTimeRange])
        /// Immediate transcription of live audio.
        public static let progressiveTranscription = Preset(name: "progressiveTranscription", [], [.volatileResults, .fastResults], [])
        /// Immediate transcription of live audio, cross-referenced to stream time-codes.
        public static let timeIndexedProgressiveTranscription = Preset(name: "timeIndexedProgressiveTranscription", [], [.volatileResults, .fastResults], [.audioTimeRange])
    }

    public let locale: Locale
    public let transcriptionOptions: Set<TranscriptionOption>
    public let reportingOptions: Set<ReportingOption>
    public let attributeOptions: Set<ResultAttributeOption>
    /// A prepared custom language model whose phrases and words bias Whisper's search (Earshot
    /// extension: Apple's SpeechTranscriber takes none; see Docs/CUSTOM_LANGUAGE_MODELS.md).
    public let customLanguageModel: SFSpeechLanguageModel.Configuration?
    private let presetName: String?
    private let channel = ResultChannel<Result>()

    /// A transcriber's result (Apple's `SpeechTranscriber.Result`).
    public typealias Result = TranscriptionResult<SpeechTranscriber>

    /// This module's results in the analyzer it is part of; ends when the session finishes.
    public var results: ModuleResults<Result> { ModuleResults(stream: channel.stream) }

    public init(locale: Locale, transcriptionOptions: Set<TranscriptionOption>, reportingOptions: Set<ReportingOption>, attributeOptions: Set<ResultAttributeOption>,
                customLanguageModel: SFSpeechLanguageModel.Configuration? = nil) {
        self.locale = locale
        self.transcriptionOptions = transcriptionOptions
        self.reportingOptions = reportingOptions
        self.attributeOptions = attributeOptions
        self.customLanguageModel = customLanguageModel
        presetName = nil
    }

    public var selectedLocales: [Locale] { [locale] }

    public init(locale: Locale, preset: Preset, customLanguageModel: SFSpeechLanguageModel.Configuration? = nil) {
        self.locale = locale
        transcriptionOptions = preset.transcriptionOptions
        reportingOptions = preset.reportingOptions
        attributeOptions = preset.attributeOptions
        self.customLanguageModel = customLanguageModel
        presetName = preset.name
    }

    /// Whether this machine can run the module (the engines are built in; the daemon decides on assets).
    public static var isAvailable: Bool { true }

    public var moduleConfiguration: ModuleConfiguration {
        ModuleConfiguration(kind: .transcriber, locale: locale.identifier, preset: presetName,
                            transcriptionOptions: transcriptionOptions.map(\.rawValue).sorted(),
                            reportingOptions: reportingOptions.map(\.rawValue).sorted(),
                            attributeOptions: attributeOptions.map(\.rawValue).sorted())
    }

    /// The module as a session opens it: with its custom language model (reading the handle file;
    /// throws if it was never prepared).
    func sessionConfiguration() async throws -> ModuleConfiguration {
        var configuration = moduleConfiguration
        if let customLanguageModel { configuration.languageModel = try await SFSpeechLanguageModel.use(customLanguageModel) }
        return configuration
    }
}

/// Dictation-style recognition with content hints and custom vocabulary (Apple's `DictationTranscriber`).
public final class DictationTranscriber: LocaleDependentSpeechModule {
    public static let assetKind = AssetKind.dictation

    public enum TranscriptionOption: String, CaseIterable, Hashable, Sendable {
        case punctuation, emoji, etiquetteReplacements
    }

    public enum ReportingOption: String, CaseIterable, Hashable, Sendable {
        case volatileResults, alternativeTranscriptions, frequentFinalization
    }

    public enum ResultAttributeOption: String, CaseIterable, Hashable, Sendable {
        case audioTimeRange, transcriptionConfidence
    }

    /// A processing hint about the audio; a bias, not a filter.
    public struct ContentHint: Hashable, Sendable {
        let name: String
        /// The prepared custom language model of a `customizedLanguage` hint.
        let modelConfiguration: SFSpeechLanguageModel.Configuration?

        init(name: String, modelConfiguration: SFSpeechLanguageModel.Configuration? = nil) {
            self.name = name
            self.modelConfiguration = modelConfiguration
        }

        /// Recognition biased towards a custom language model prepared with
        /// ``SFSpeechLanguageModel/prepareCustomLanguageModel(for:configuration:)``. A session whose
        /// model was never prepared fails to open, saying so.
        public static func customizedLanguage(modelConfiguration: SFSpeechLanguageModel.Configuration) -> ContentHint {
            ContentHint(name: "customizedLanguage", modelConfiguration: modelConfiguration)
        }

        /// Audio about a minute long.
        public static let shortForm = ContentHint(name: "shortForm")
        /// A speaker far from the microphone.
        public static let farField = ContentHint(name: "farField")
        /// A heavy accent, lisp or other confounding factor.
        public static let atypicalSpeech = ContentHint(name: "atypicalSpeech")
    }

    /// A named bundle of hints and options (Apple's preset matrix).
    public struct Preset: Hashable, Sendable {
        public var contentHints: Set<ContentHint>
        public var transcriptionOptions: Set<TranscriptionOption>
        public var reportingOptions: Set<ReportingOption>
        public var attributeOptions: Set<ResultAttributeOption>
        let name: String?

        public init(contentHints: Set<ContentHint>, transcriptionOptions: Set<TranscriptionOption>, reportingOptions: Set<ReportingOption>, attributeOptions: Set<ResultAttributeOption>) {
            self.init(name: nil, contentHints, transcriptionOptions, reportingOptions, attributeOptions)
        }

        init(name: String?, _ h: Set<ContentHint>, _ t: Set<TranscriptionOption>, _ r: Set<ReportingOption>, _ a: Set<ResultAttributeOption>) {
            self.name = name
            contentHints = h
            transcriptionOptions = t
            reportingOptions = r
            attributeOptions = a
        }

        /// A short phrase without punctuation.
        public static let phrase = Preset(name: "phrase", [.shortForm], [], [], [])
        /// About a minute of audio.
        public static let shortDictation = Preset(name: "shortDictation", [.shortForm], [.punctuation], [], [])
        /// Immediate transcription of about a minute of live audio.
        public static let progressiveShortDictation = Preset(name: "progressiveShortDictation", [.shortForm], [.punctuation], [.volatileResults, .frequentFinalization], [])
        /// More than a minute of audio.
        public static let longDictation = Preset(name: "longDictation", [], [.punctuation], [], [])
        /// Immediate transcription of lengthy audio.
        public static let progressiveLongDictation = Preset(name: "progressiveLongDictation", [], [.punctuation], [.volatileResults], [])
        /// Lengthy audio, cross-referencing words to time-codes.
        public static let timeIndexedLongDictation = Preset(name: "timeIndexedLongDictation", [], [.punctuation], [], [.audioTimeRange])
    }

    public let locale: Locale
    public let contentHints: Set<ContentHint>
    public let transcriptionOptions: Set<TranscriptionOption>
    public let reportingOptions: Set<ReportingOption>
    public let attributeOptions: Set<ResultAttributeOption>
    private let presetName: String?
    private let channel = ResultChannel<Result>()

    /// A dictation result (Apple's `DictationTranscriber.Result`): the transcriber's shape, a
    /// distinct type.
    public typealias Result = TranscriptionResult<DictationTranscriber>

    /// This module's results in the analyzer it is part of; ends when the session finishes.
    public var results: ModuleResults<Result> { ModuleResults(stream: channel.stream) }

    public var selectedLocales: [Locale] { [locale] }

    public init(locale: Locale, contentHints: Set<ContentHint>, transcriptionOptions: Set<TranscriptionOption>, reportingOptions: Set<ReportingOption>, attributeOptions: Set<ResultAttributeOption>) {
        self.locale = locale
        self.contentHints = contentHints
        self.transcriptionOptions = transcriptionOptions
        self.reportingOptions = reportingOptions
        self.attributeOptions = attributeOptions
        presetName = nil
    }

    public init(locale: Locale, preset: Preset) {
        self.locale = locale
        contentHints = preset.contentHints
        transcriptionOptions = preset.transcriptionOptions
        reportingOptions = preset.reportingOptions
        attributeOptions = preset.attributeOptions
        presetName = preset.name
    }

    /// The module as the daemon's asset queries see it: a custom language model is not an asset
    /// requirement, so its hint is left out (``sessionConfiguration()`` names the model).
    public var moduleConfiguration: ModuleConfiguration {
        ModuleConfiguration(kind: .dictation, locale: locale.identifier, preset: presetName,
                            transcriptionOptions: transcriptionOptions.map(\.rawValue).sorted(),
                            reportingOptions: reportingOptions.map(\.rawValue).sorted(),
                            attributeOptions: attributeOptions.map(\.rawValue).sorted(),
                            contentHints: contentHints.filter { $0.modelConfiguration == nil }.map(\.name).sorted())
    }

    /// The module as a session opens it: with the prepared custom language model its
    /// `customizedLanguage` hint names (reading the handle file; throws if it was never prepared).
    func sessionConfiguration() async throws -> ModuleConfiguration {
        var configuration = moduleConfiguration
        if let model = contentHints.compactMap(\.modelConfiguration).first {
            configuration.languageModel = try await SFSpeechLanguageModel.use(model)
        }
        return configuration
    }
}

/// Voice activity detection (Apple's `SpeechDetector`): language-independent.
public final class SpeechDetector: SpeechModule {
    /// How eagerly audio counts as speech.
    public enum SensitivityLevel: String, CaseIterable, Hashable, Sendable {
        case low, medium, high
    }

    public struct DetectionOptions: Hashable, Sendable {
        public var sensitivityLevel: SensitivityLevel
        public init(sensitivityLevel: SensitivityLevel) { self.sensitivityLevel = sensitivityLevel }
    }

    public let detectionOptions: DetectionOptions
    /// Whether the detector emits speech/no-speech results itself (besides gating transcribers).
    public let reportResults: Bool
    private let channel = ResultChannel<DetectionResult>()

    /// Apple's `SpeechDetector.Result`.
    public typealias Result = DetectionResult

    /// Speech and no-speech ranges (with `reportResults`); ends when the session finishes.
    public var results: ModuleResults<DetectionResult> { ModuleResults(stream: channel.stream) }

    public init(detectionOptions: DetectionOptions = DetectionOptions(sensitivityLevel: .medium), reportResults: Bool = false) {
        self.detectionOptions = detectionOptions
        self.reportResults = reportResults
    }

    public var moduleConfiguration: ModuleConfiguration {
        ModuleConfiguration(kind: .detector, locale: nil, reportingOptions: reportResults ? ["reportResults"] : [],
                            sensitivity: detectionOptions.sensitivityLevel.rawValue)
    }
}

extension SpeechTranscriber: ResultReceiving {
    func receive(_ result: AnalyzerResult) { channel.yield(Result(result)) }
    func finishResults(_ error: (any Error)?) { channel.finish(error) }
    func noteUnhonored(_ requests: [UnhonoredRequest]) { channel.unhonored = requests }
    var unhonored: [UnhonoredRequest] { channel.unhonored }

    /// What this module asks for that the daemon's engine does not do — transcription options,
    /// contextual strings — as reported when analysis started and after each `setContext` or
    /// `setModules` (Earshot extension; empty before analysis starts). What is new in a report
    /// is also written to standard error.
    public var unhonoredRequests: [UnhonoredRequest] { unhonored }
}

extension DictationTranscriber: ResultReceiving {
    func receive(_ result: AnalyzerResult) { channel.yield(Result(result)) }
    func finishResults(_ error: (any Error)?) { channel.finish(error) }
    func noteUnhonored(_ requests: [UnhonoredRequest]) { channel.unhonored = requests }
    var unhonored: [UnhonoredRequest] { channel.unhonored }

    /// What this module asks for that the daemon's engine does not do — `.punctuation`, `.emoji`,
    /// `.etiquetteReplacements`, contextual words PocketSphinx cannot pronounce — as reported
    /// when analysis started and after each `setContext` or `setModules` (Earshot extension;
    /// empty before analysis starts). What is new in a report is also written to standard error.
    public var unhonoredRequests: [UnhonoredRequest] { unhonored }
}

extension SpeechDetector: ResultReceiving {
    func receive(_ result: AnalyzerResult) { channel.yield(DetectionResult(result)) }
    func finishResults(_ error: (any Error)?) { channel.finish(error) }
    func noteUnhonored(_ requests: [UnhonoredRequest]) {}
    var unhonored: [UnhonoredRequest] { [] }
}
