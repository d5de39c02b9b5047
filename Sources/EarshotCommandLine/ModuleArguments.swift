import EarshotWire

/// `--locale L [--module transcriber|dictation|detector]` → the module configuration(s) to ask for.
public enum ModuleArguments {
    public enum Problem: Error, CustomStringConvertible {
        case missingLocale
        case unknownModule(String)
        case unknownPreset(String, kind: AssetKind)
        public var description: String {
            switch self {
            case .missingLocale: "--locale is required (e.g. --locale en-US)"
            case .unknownModule(let m): "unknown module '\(m)' (transcriber, dictation or detector)"
            case .unknownPreset(let name, let kind):
                "unknown \(kind.rawValue) preset '\(name)' (\((ModuleArguments.presets[kind] ?? []).joined(separator: ", ")))"
            }
        }
    }

    /// Apple's preset names per module kind (`--preset`).
    public static let presets: [AssetKind: [String]] = [
        .transcriber: ["transcription", "transcriptionWithAlternatives", "timeIndexedTranscriptionWithAlternatives",
                       "progressiveTranscription", "timeIndexedProgressiveTranscription"],
        .dictation: ["phrase", "shortDictation", "progressiveShortDictation", "longDictation", "progressiveLongDictation", "timeIndexedLongDictation"],
    ]

    /// Candidate configurations in order of preference: the named kind, or — as Apple advises —
    /// a transcriber first and dictation as the fallback.
    public static func candidates(_ arguments: Arguments) throws(Problem) -> [ModuleConfiguration] {
        try candidates(locale: arguments.value("locale"), module: arguments.value("module"), preset: arguments.value("preset"))
    }

    /// Candidates for an explicit locale, optional module kind name and optional preset (which the
    /// catalog may prefer another asset for, e.g. `progressiveTranscription`); a preset narrows the
    /// candidates to the kind that has it.
    public static func candidates(locale: String?, module: String?, preset: String?) throws(Problem) -> [ModuleConfiguration] {
        var found = try candidates(locale: locale, module: module)
        guard let preset else { return found }
        found = found.filter { presets[$0.kind]?.contains(preset) == true }
        guard !found.isEmpty else { throw .unknownPreset(preset, kind: AssetKind(rawValue: module ?? "") ?? .transcriber) }
        return found.map {
            var configuration = $0
            configuration.preset = preset
            return configuration
        }
    }

    /// Candidates for an explicit locale and optional module kind name.
    public static func candidates(locale: String?, module: String?) throws(Problem) -> [ModuleConfiguration] {
        let kinds: [AssetKind]
        if let name = module {
            guard let kind = AssetKind(rawValue: name) else { throw .unknownModule(name) }
            kinds = [kind]
        } else {
            kinds = [.transcriber, .dictation]
        }
        if kinds == [.detector] { return [ModuleConfiguration(kind: .detector, locale: nil)] }
        guard let locale else { throw .missingLocale }
        return kinds.map { ModuleConfiguration(kind: $0, locale: localeValue(locale)) }
    }

    /// The locale a `--locale` value names: `auto` asks for language identification (`und`).
    public static func localeValue(_ value: String) -> String {
        value.lowercased() == "auto" ? LocaleTag.undetermined : value
    }
}
