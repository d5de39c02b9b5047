import EarshotWire

/// What each engine does with a module's transcription options and contextual strings, so that
/// whatever it cannot honour is reported (``UnhonoredRequest``), never dropped silently. (Content
/// hints are matched when the asset is chosen: an asset serves a module only if its catalog entry
/// lists the module's hints.)
enum EngineCapabilities {
    /// The requests of `configuration` (module `module`, served by `engine`) that the engine does
    /// not honour; `unusableWords` are the contextual words a PocketSphinx decoder could not use.
    static func unhonored(_ configuration: ModuleConfiguration, engine: String, module: Int, context: AnalysisContextData,
                          decoding: DecodingOptions? = nil, unusableWords: [(word: String, reason: String)]) -> [UnhonoredRequest] {
        guard let kind = EngineKind(rawValue: engine), kind != .sileroVAD else { return [] }
        let name = kind.displayName
        let honouredOptions: Set<String>
        var requests: [UnhonoredRequest] = []
        switch kind {
        case .whisper:
            honouredOptions = [ModuleConfiguration.translateOption]
            requests += WhisperContext.split(context.allStrings).refused.map {
                UnhonoredRequest(module: module, kind: .contextualString, value: $0.phrase, reason: $0.reason)
            }
        case .pocketSphinx:
            honouredOptions = []
            requests += unusableWords.map { UnhonoredRequest(module: module, kind: .contextualString, value: $0.word, reason: $0.reason) }
            if let decoding {
                let asked = [("prompt", decoding.prompt != nil), ("beam_size", decoding.beamSize != nil), ("temperature", decoding.temperature != nil)]
                requests += asked.filter(\.1).map {
                    UnhonoredRequest(module: module, kind: .decodingOption, value: $0.0, reason: "PocketSphinx decodes with its own search and takes no \($0.0)")
                }
            }
        case .sileroVAD:
            return []
        }
        let options = configuration.transcriptionOptions.filter { !honouredOptions.contains($0) }.map {
            UnhonoredRequest(module: module, kind: .transcriptionOption, value: $0, reason: optionReason($0, engine: name))
        }
        return options + requests
    }

    private static func optionReason(_ option: String, engine: String) -> String {
        switch option {
        case "punctuation": "\(engine) recognizes words only: its text has no punctuation"
        case "emoji": "\(engine) does not turn spoken emoji names into emoji"
        case "etiquetteReplacements": "\(engine) does not redact words"
        default: "\(engine) has no option \(option)"
        }
    }
}
