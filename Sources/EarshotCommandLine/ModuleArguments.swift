import EarshotWire

/// `--locale L [--module transcriber|dictation|detector]` → the module configuration(s) to ask for.
public enum ModuleArguments {
    public enum Problem: Error, CustomStringConvertible {
        case missingLocale
        case unknownModule(String)
        public var description: String {
            switch self {
            case .missingLocale: "--locale is required (e.g. --locale en-US)"
            case .unknownModule(let m): "unknown module '\(m)' (transcriber, dictation or detector)"
            }
        }
    }

    /// Candidate configurations in order of preference: the named kind, or — as Apple advises —
    /// a transcriber first and dictation as the fallback.
    public static func candidates(_ arguments: Arguments) throws(Problem) -> [ModuleConfiguration] {
        try candidates(locale: arguments.value("locale"), module: arguments.value("module"))
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
        return kinds.map { ModuleConfiguration(kind: $0, locale: locale) }
    }
}
