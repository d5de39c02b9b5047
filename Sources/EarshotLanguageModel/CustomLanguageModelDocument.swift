import Foundation

/// The file `SFCustomLanguageModelData.export(to:)` writes and the daemon reads: an app's custom
/// language model data (Apple's §11 DSL) as JSON, versioned (`format`, `formatVersion`), templates
/// kept unexpanded. Read strictly: unknown keys, another format or version, and anything past
/// ``CustomLanguageModelLimits`` are errors, counted before anything is expanded. Format:
/// Docs/CUSTOM_LANGUAGE_MODELS.md.
public struct CustomLanguageModelDocument: Codable, Hashable, Sendable {
    /// The value of `format`.
    public static let formatName = "earshot-custom-language-model"
    /// The `formatVersion` this build writes and reads.
    public static let currentVersion = 1

    /// An exact phrase and its weight (counts are relative within one file).
    public struct Phrase: Codable, Hashable, Sendable {
        public var phrase: String
        public var count: Int
        public init(phrase: String, count: Int) {
            self.phrase = phrase
            self.count = count
        }
    }

    /// A template string (`<class>` marks a class's members) and the total weight of its expansions.
    public struct Template: Codable, Hashable, Sendable {
        public var body: String
        public var count: Int
        public init(body: String, count: Int) {
            self.body = body
            self.count = count
        }
    }

    /// Templates and the classes they expand over.
    public struct TemplateGroup: Codable, Hashable, Sendable {
        public var classes: [String: [String]]
        public var templates: [Template]
        public init(classes: [String: [String]], templates: [Template]) {
            self.classes = classes
            self.templates = templates
        }
    }

    /// How a word is said: one or more X-SAMPA strings (symbols separated by spaces).
    public struct Pronunciation: Codable, Hashable, Sendable {
        public var grapheme: String
        public var phonemes: [String]
        public init(grapheme: String, phonemes: [String]) {
            self.grapheme = grapheme
            self.phonemes = phonemes
        }
    }

    public var format: String
    public var formatVersion: Int
    /// BCP-47 identifier of the locale the data is for (`en-US`).
    public var locale: String
    public var identifier: String
    public var version: String
    public var phrases: [Phrase]
    public var templateGroups: [TemplateGroup]
    public var pronunciations: [Pronunciation]

    public init(locale: String, identifier: String, version: String, phrases: [Phrase] = [], templateGroups: [TemplateGroup] = [],
                pronunciations: [Pronunciation] = []) {
        format = Self.formatName
        formatVersion = Self.currentVersion
        self.locale = locale
        self.identifier = identifier
        self.version = version
        self.phrases = phrases
        self.templateGroups = templateGroups
        self.pronunciations = pronunciations
    }

    /// Parses and checks `data` (an exported file's bytes) against `limits`.
    public static func read(_ data: Data, limits: CustomLanguageModelLimits = .standard) throws(CustomLanguageModelError) -> CustomLanguageModelDocument {
        guard data.count <= limits.maxFileBytes else { throw .limitExceeded("file size", limit: limits.maxFileBytes) }
        // The format and version first, so a newer file is told apart from a malformed one.
        let header: Header
        do {
            header = try JSONDecoder().decode(Header.self, from: data)
        } catch {
            throw .malformed(Self.describe(error))
        }
        guard header.format == formatName else { throw .unsupportedFormat(header.format ?? "(none)") }
        guard header.formatVersion == currentVersion else { throw .unsupportedVersion(header.formatVersion ?? 0) }
        let document: CustomLanguageModelDocument
        do {
            document = try JSONDecoder().decode(CustomLanguageModelDocument.self, from: data)
        } catch let error as CustomLanguageModelError {
            throw error
        } catch {
            throw .malformed(Self.describe(error))
        }
        try document.validate(limits)
        return document
    }

    /// The file's bytes (keys sorted), after the same checks ``read(_:limits:)`` makes.
    public func encoded(limits: CustomLanguageModelLimits = .standard) throws(CustomLanguageModelError) -> Data {
        try validate(limits)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        do {
            let data = try encoder.encode(self)
            guard data.count <= limits.maxFileBytes else { throw CustomLanguageModelError.limitExceeded("file size", limit: limits.maxFileBytes) }
            return data
        } catch let error as CustomLanguageModelError {
            throw error
        } catch {
            throw .malformed(String(describing: error))
        }
    }

    /// Checks every bound and reference; templates are counted, never expanded.
    public func validate(_ limits: CustomLanguageModelLimits) throws(CustomLanguageModelError) {
        func text(_ value: String, _ field: String, max: Int) throws(CustomLanguageModelError) {
            guard !value.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else { throw .invalid(field, "is empty") }
            guard value.count <= max else { throw .limitExceeded("\(field) length", limit: max) }
            guard !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control && $0 != " " }) else {
                throw .invalid(field, "contains control characters")
            }
        }
        func weight(_ count: Int, _ field: String) throws(CustomLanguageModelError) {
            guard count >= 1, count <= limits.maxCount else { throw .invalid(field, "count \(count) is not in 1…\(limits.maxCount)") }
        }
        try text(locale, "locale", max: 35)
        guard Locale.Components(identifier: locale).languageComponents.languageCode != nil else { throw .invalid("locale", "\"\(locale)\" is not a locale identifier") }
        try text(identifier, "identifier", max: limits.maxIdentifierLength)
        try text(version, "version", max: limits.maxIdentifierLength)
        guard phrases.count <= limits.maxPhrases else { throw .limitExceeded("phrases", limit: limits.maxPhrases) }
        for (index, phrase) in phrases.enumerated() {
            try text(phrase.phrase, "phrases[\(index)].phrase", max: limits.maxPhraseLength)
            try weight(phrase.count, "phrases[\(index)]")
        }
        guard templateGroups.count <= limits.maxTemplateGroups else { throw .limitExceeded("template groups", limit: limits.maxTemplateGroups) }
        var expansions = 0
        for (groupIndex, group) in templateGroups.enumerated() {
            guard group.classes.count <= limits.maxClasses else { throw .limitExceeded("classes in one group", limit: limits.maxClasses) }
            for (name, members) in group.classes {
                try text(name, "templateGroups[\(groupIndex)].classes name", max: limits.maxClassNameLength)
                guard !name.contains("<"), !name.contains(">") else { throw .invalid("class \"\(name)\"", "a class name holds no angle brackets") }
                guard !members.isEmpty else { throw .invalid("class \"\(name)\"", "has no members") }
                guard members.count <= limits.maxClassMembers else { throw .limitExceeded("members of class \"\(name)\"", limit: limits.maxClassMembers) }
                for member in members { try text(member, "a member of class \"\(name)\"", max: limits.maxPhraseLength) }
            }
            guard group.templates.count <= limits.maxTemplates else { throw .limitExceeded("templates in one group", limit: limits.maxTemplates) }
            for (index, template) in group.templates.enumerated() {
                let field = "templateGroups[\(groupIndex)].templates[\(index)]"
                try text(template.body, field + ".body", max: limits.maxPhraseLength)
                try weight(template.count, field)
                let parsed = try TemplateExpansion(template.body)
                let count = try parsed.expansions(classes: group.classes, limit: limits.maxExpandedPhrases - expansions, total: limits.maxExpandedPhrases)
                guard parsed.longestExpansion(classes: group.classes) <= limits.maxExpandedPhraseLength else {
                    throw .limitExceeded("expanded phrase length of \(field)", limit: limits.maxExpandedPhraseLength)
                }
                expansions += count
            }
        }
        guard pronunciations.count <= limits.maxPronunciations else { throw .limitExceeded("pronunciations", limit: limits.maxPronunciations) }
        for (index, pronunciation) in pronunciations.enumerated() {
            try text(pronunciation.grapheme, "pronunciations[\(index)].grapheme", max: limits.maxGraphemeLength)
            guard !pronunciation.grapheme.contains(where: \.isWhitespace) else { throw .invalid("pronunciations[\(index)].grapheme", "is one word, with no spaces") }
            guard !pronunciation.phonemes.isEmpty else { throw .invalid("pronunciations[\(index)].phonemes", "is empty") }
            guard pronunciation.phonemes.count <= limits.maxPronunciationVariants else {
                throw .limitExceeded("pronunciations of \"\(pronunciation.grapheme)\"", limit: limits.maxPronunciationVariants)
            }
            for phonemes in pronunciation.phonemes {
                try text(phonemes, "pronunciations[\(index)].phonemes", max: limits.maxPronunciationLength)
                _ = try XSAMPA.phones(of: phonemes, grapheme: pronunciation.grapheme, locale: locale)
            }
        }
    }

    /// What a decoder that biases towards phrases (Whisper's contextual strings) takes from the
    /// data, most telling first: the phrases by weight, the pronounced words, then the members of
    /// the templates' classes (whole numbers left out: every decoder knows them); each once.
    public var biasPhrases: [String] {
        var seen: Set<String> = [], found: [String] = []
        func add(_ phrase: String) {
            let trimmed = phrase.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !trimmed.isEmpty, !trimmed.allSatisfy({ $0.isNumber || $0.isPunctuation }), seen.insert(trimmed.lowercased()).inserted else { return }
            found.append(trimmed)
        }
        let byWeight = phrases.enumerated().sorted { ($0.element.count, -$0.offset) > ($1.element.count, -$1.offset) }
        for entry in byWeight { add(entry.element.phrase) }
        for pronunciation in pronunciations { add(pronunciation.grapheme) }
        for group in templateGroups {
            for name in group.classes.keys.sorted() { group.classes[name]?.forEach(add) }
        }
        return found
    }

    private struct Header: Decodable {
        var format: String?
        var formatVersion: Int?
    }

    private enum CodingKeys: String, CodingKey, CaseIterable {
        case format, formatVersion, locale, identifier, version, phrases, templateGroups, pronunciations
    }

    public init(from decoder: any Decoder) throws {
        let container = try StrictKeys.container(decoder, CodingKeys.self)
        format = try container.decode(String.self, forKey: .format)
        formatVersion = try container.decode(Int.self, forKey: .formatVersion)
        locale = try container.decode(String.self, forKey: .locale)
        identifier = try container.decode(String.self, forKey: .identifier)
        version = try container.decode(String.self, forKey: .version)
        phrases = try container.decodeIfPresent([Phrase].self, forKey: .phrases) ?? []
        templateGroups = try container.decodeIfPresent([TemplateGroup].self, forKey: .templateGroups) ?? []
        pronunciations = try container.decodeIfPresent([Pronunciation].self, forKey: .pronunciations) ?? []
    }

    private static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, let context):
            return "missing \"\(key.stringValue)\"" + at(context)
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            return "wrong type" + at(context) + (context.debugDescription.isEmpty ? "" : ": \(context.debugDescription)")
        case DecodingError.dataCorrupted(let context):
            return context.debugDescription + at(context)
        default:
            return String(describing: error)
        }
    }

    private static func at(_ context: DecodingError.Context) -> String {
        context.codingPath.isEmpty ? "" : " at " + context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
    }
}

extension CustomLanguageModelDocument.Phrase {
    private enum CodingKeys: String, CodingKey, CaseIterable { case phrase, count }
    public init(from decoder: any Decoder) throws {
        let container = try StrictKeys.container(decoder, CodingKeys.self)
        self.init(phrase: try container.decode(String.self, forKey: .phrase), count: try container.decode(Int.self, forKey: .count))
    }
}

extension CustomLanguageModelDocument.Template {
    private enum CodingKeys: String, CodingKey, CaseIterable { case body, count }
    public init(from decoder: any Decoder) throws {
        let container = try StrictKeys.container(decoder, CodingKeys.self)
        self.init(body: try container.decode(String.self, forKey: .body), count: try container.decode(Int.self, forKey: .count))
    }
}

extension CustomLanguageModelDocument.TemplateGroup {
    private enum CodingKeys: String, CodingKey, CaseIterable { case classes, templates }
    public init(from decoder: any Decoder) throws {
        let container = try StrictKeys.container(decoder, CodingKeys.self)
        self.init(classes: try container.decode([String: [String]].self, forKey: .classes),
                  templates: try container.decode([CustomLanguageModelDocument.Template].self, forKey: .templates))
    }
}

extension CustomLanguageModelDocument.Pronunciation {
    private enum CodingKeys: String, CodingKey, CaseIterable { case grapheme, phonemes }
    public init(from decoder: any Decoder) throws {
        let container = try StrictKeys.container(decoder, CodingKeys.self)
        self.init(grapheme: try container.decode(String.self, forKey: .grapheme), phonemes: try container.decode([String].self, forKey: .phonemes))
    }
}

/// Refuses an object with a key its type does not define (Codable ignores them).
enum StrictKeys {
    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// The object's container, after checking it has no key but `keys`' cases.
    static func container<Keys: CodingKey & CaseIterable>(_ decoder: any Decoder, _ keys: Keys.Type) throws -> KeyedDecodingContainer<Keys> {
        let allowed = Set(Keys.allCases.map(\.stringValue))
        if let unknown = try decoder.container(keyedBy: AnyKey.self).allKeys.first(where: { !allowed.contains($0.stringValue) }) {
            let path = (decoder.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue } + [unknown.stringValue]).joined(separator: ".")
            throw CustomLanguageModelError.malformed("unknown key \"\(path)\"")
        }
        return try decoder.container(keyedBy: keys)
    }
}
