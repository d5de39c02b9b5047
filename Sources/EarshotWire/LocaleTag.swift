/// A BCP-47 language tag reduced to what identifies a speech locale: language, script, region.
/// `en_US`, `en-us` and `en-US-u-ca-gregory` are all `en-US`. Never compare raw strings.
public struct LocaleTag: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Lower-case ISO 639 language.
    public let language: String
    /// Title-case ISO 15924 script, if any.
    public let script: String?
    /// Upper-case ISO 3166 region or 3-digit UN M.49 area, if any.
    public let region: String?

    /// `und` (undetermined): a module with this locale asks the engine to identify the language
    /// it hears; a catalog asset that lists it can.
    public static let undetermined = "und"

    /// Parses `identifier`; `nil` when it has no valid language subtag.
    public init?(_ identifier: String) {
        let parts = identifier.split(whereSeparator: { $0 == "-" || $0 == "_" || $0 == "." || $0 == "@" }).map(String.init)
        guard let first = parts.first, (2...3).contains(first.count), first.allSatisfy(\.isLetter), first.allSatisfy(\.isASCII) else { return nil }
        language = first.lowercased()
        var script: String?
        var region: String?
        for part in parts.dropFirst() {
            if part.count == 1 { break } // extension (-u-, -x-, …) or private use: ignore the rest
            if script == nil, region == nil, part.count == 4, part.allSatisfy({ $0.isLetter && $0.isASCII }) {
                script = part.prefix(1).uppercased() + part.dropFirst().lowercased()
            } else if region == nil, (part.count == 2 && part.allSatisfy({ $0.isLetter && $0.isASCII })) || (part.count == 3 && part.allSatisfy(\.isNumber)) {
                region = part.uppercased()
            }
            // Variants and other subtags do not change which model serves the locale.
        }
        self.script = script
        self.region = region
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let tag = LocaleTag(text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "'\(text)' is not a BCP-47 locale"))
        }
        self = tag
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }

    /// The canonical form, e.g. `en-US`, `zh-Hant-TW`.
    public var description: String {
        ([language] + [script, region].compactMap { $0 }).joined(separator: "-")
    }

    /// Whether this tag, as a supported locale, serves `requested`: the same language, and script and
    /// region equal where this tag names them (a language-only tag serves every region).
    public func serves(_ requested: LocaleTag) -> Bool {
        language == requested.language
            && (script == nil || script == requested.script)
            && (region == nil || region == requested.region)
    }

    /// The best of `supported` for `requested`: an exact match, else one that serves it (the most
    /// specific first), else — for a request without region — the first with the same language.
    public static func bestMatch(for requested: LocaleTag, in supported: [LocaleTag]) -> LocaleTag? {
        if let exact = supported.first(where: { $0 == requested }) { return exact }
        let serving = supported.filter { $0.serves(requested) }
            .sorted { ($0.region != nil ? 2 : 0) + ($0.script != nil ? 1 : 0) > ($1.region != nil ? 2 : 0) + ($1.script != nil ? 1 : 0) }
        if let best = serving.first { return best }
        guard requested.region == nil else { return nil }
        return supported.filter { $0.language == requested.language && (requested.script == nil || $0.script == requested.script) }
            .sorted { $0.description < $1.description }.first
    }
}
