import EarshotAssets
import EarshotWire

/// A transcription asked for the way Wyoming and OpenAI clients ask: a model name or kind and a
/// language at most, no Apple module vocabulary.
struct TranscriptionRequest: Sendable {
    /// An installed asset's id; one that is not installed falls back to the default choice.
    var name: String?
    /// Only this kind of module (`dictation`, `transcriber`), else a transcriber, then dictation.
    var kind: AssetKind?
    /// BCP-47 language; nil: identify it (`und`) where a transcriber can, else English.
    var language: String?
    /// Speech translated into English.
    var translate = false
    /// Word times and confidences in the results.
    var wordTimes = false
    /// Whisper's prompt, beam and temperature (OpenAI's `prompt` and `temperature`).
    var decoding: DecodingOptions?
    /// Contextual strings (Wyoming's `transcribe` context).
    var context = AnalysisContextData()
}

extension AnalysisCoordinator {
    /// Opens a session for `request`: the named model, else a transcriber for the language, else
    /// dictation (Apple's advice), whichever is installed — the first that opens wins.
    func openTranscription(_ request: TranscriptionRequest, for client: AnalysisClient,
                           events: @escaping @Sendable (String, AnalysisEvent) -> Void) async throws -> String {
        let language = request.language ?? "en"
        let options = request.translate ? [ModuleConfiguration.translateOption] : []
        let attributes = request.wordTimes ? ["audioTimeRange", "transcriptionConfidence"] : []
        func module(_ kind: AssetKind, _ locale: String, preset: String? = nil) -> ModuleConfiguration {
            ModuleConfiguration(kind: kind, locale: locale, preset: preset, transcriptionOptions: kind == .dictation ? [] : options, attributeOptions: attributes)
        }
        var candidates: [ModuleConfiguration] = switch request.kind {
        case .dictation?: [module(.dictation, language)]
        case .transcriber?: [module(.transcriber, language)]
        default: [module(.transcriber, language), module(.dictation, language)]
        }
        if request.language == nil, request.kind != .dictation { candidates.insert(module(.transcriber, LocaleTag.undetermined), at: 0) }
        if request.translate { candidates.removeAll { $0.kind == .dictation } }
        // A named asset: its preferred preset steers resolution to it among assets serving the same
        // locale; the session itself runs without the preset, whose reporting nobody here reads
        // (`progressiveTranscription` made every Wyoming request for tiny.en decode volatile
        // results each second, one of which the final result then waited for).
        var steering: ModuleConfiguration?
        if let name = request.name, let asset = try await assets.installedAssets().first(where: { $0.current && $0.entry.id == name }) {
            let locale = asset.entry.locales.first { $0 == request.language } ?? asset.entry.locales.first ?? language
            candidates = [module(asset.entry.kind, locale)]
            steering = module(asset.entry.kind, locale, preset: asset.entry.preferredPresets.first)
        }
        var lastError: (any Error)?
        for candidate in candidates {
            do {
                return try await open([candidate], resolvedAs: steering.map { [$0] },
                                      options: AnalysisOptions(modelRetention: .lingering, input: .recording, decoding: request.decoding),
                                      context: request.context, for: client, events: events)
            } catch {
                lastError = error
            }
        }
        throw lastError ?? AssetError.notInstalled("no speech model is installed for \(language)")
    }

    /// What session `id`'s engine does not take of its decoding options and contextual strings,
    /// by field name (OpenAI's `prompt`, `temperature`; `context`), with why.
    func ignoredRequests(of id: String) async -> [String: String] {
        var ignored: [String: String] = [:]
        for request in await speech.unhonored(id) {
            switch request.kind {
            case .decodingOption: ignored[request.value == "beam_size" ? "beam_size" : request.value] = request.reason
            case .contextualString: ignored["context"] = request.reason
            case .transcriptionOption: break
            }
        }
        return ignored
    }
}
