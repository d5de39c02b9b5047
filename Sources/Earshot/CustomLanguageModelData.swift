import EarshotLanguageModel
import EarshotSystem
import Foundation

/// Builds the result of a custom language model DSL block: anything that can put itself into a
/// ``SFCustomLanguageModelData``.
public protocol DataInsertable {
    func insert(data: SFCustomLanguageModelData)
}

/// Builds the templates of a ``SFCustomLanguageModelData/PhraseCountsFromTemplates`` block.
public protocol TemplateInsertable {
    func insert(generator: SFCustomLanguageModelData.TemplatePhraseCountGenerator)
}

/// An app's custom language model data (Apple's `SFCustomLanguageModelData`): phrases with weights,
/// templates that expand to many phrases, and pronunciations in X-SAMPA. `export(to:)` writes it as
/// Earshot's versioned file (Docs/CUSTOM_LANGUAGE_MODELS.md), checked against the daemon's bounds
/// and the locale's phonemes first, so bad data fails on the developer's machine.
public final class SFCustomLanguageModelData: Codable, Hashable, @unchecked Sendable {
    // @unchecked: the mutable lists are guarded by `lock`; the rest is immutable.
    public let locale: Locale
    public let identifier: String
    public let version: String

    private let lock = NSLock()
    private var phraseCounts: [PhraseCount] = []
    private var generators: [PhraseCountGenerator] = []
    private var terms: [CustomPronunciation] = []

    /// An empty container for `locale`'s data, named `identifier`, at `version`.
    public init(locale: Locale, identifier: String, version: String) {
        self.locale = locale
        self.identifier = identifier
        self.version = version
    }

    /// The data the `builder` block lists.
    public convenience init(locale: Locale, identifier: String, version: String, @DataInsertableBuilder builder: () -> any DataInsertable) {
        self.init(locale: locale, identifier: identifier, version: version)
        builder().insert(data: self)
    }

    /// Adds a phrase and its weight.
    public func insert(phraseCount: PhraseCount) {
        lock.withLock { phraseCounts.append(phraseCount) }
    }

    /// Adds a word and how it is said.
    public func insert(term: CustomPronunciation) {
        lock.withLock { terms.append(term) }
    }

    /// Adds the phrases `phraseCountGenerator` produces (a template generator is kept unexpanded;
    /// another is run at export).
    public func insert(phraseCountGenerator: PhraseCountGenerator) {
        lock.withLock { generators.append(phraseCountGenerator) }
    }

    /// The X-SAMPA symbols pronunciations for `locale` may use (those its dictation engine can
    /// say); empty for a locale Earshot has no dictation phones for.
    public static func supportedPhonemes(locale: Locale) -> [String] {
        XSAMPA.supportedSymbols(locale: locale.identifier(.bcp47))
    }

    /// Writes the data to `url` (atomically), after checking it as the daemon will: bounds,
    /// template classes, X-SAMPA symbols. Throws ``EarshotError/invalidLanguageModelData(_:)``.
    public func export(to url: URL) async throws {
        var document = try lock.withLock { try documentWithoutCustomGenerators() }
        let limits = CustomLanguageModelLimits.standard
        for generator in lock.withLock({ generators }) where !(generator is TemplatePhraseCountGenerator) {
            for try await phraseCount in generator {
                guard document.phrases.count < limits.maxPhrases else {
                    throw EarshotError.invalidLanguageModelData(CustomLanguageModelError.limitExceeded("phrases", limit: limits.maxPhrases).description)
                }
                document.phrases.append(.init(phrase: phraseCount.phrase, count: phraseCount.count))
            }
        }
        let finished = document
        try await BlockingWork.run("earshot.language-model-export") {
            let data: Data
            do {
                data = try finished.encoded(limits: limits)
            } catch {
                throw EarshotError.invalidLanguageModelData(String(describing: error))
            }
            try data.write(to: url, options: .atomic)
        }
    }

    /// The file's document, for data whose generators are all template generators.
    private func documentWithoutCustomGenerators() throws -> CustomLanguageModelDocument {
        CustomLanguageModelDocument(
            locale: locale.identifier(.bcp47), identifier: identifier, version: version,
            phrases: phraseCounts.map { .init(phrase: $0.phrase, count: $0.count) },
            templateGroups: generators.compactMap { ($0 as? TemplatePhraseCountGenerator)?.group },
            pronunciations: terms.map { .init(grapheme: $0.grapheme, phonemes: $0.phonemes) })
    }

    // MARK: Codable, Hashable (as the exported document)

    /// Decodes the exported document (templates come back as template generators).
    public init(from decoder: any Decoder) throws {
        let document = try CustomLanguageModelDocument(from: decoder)
        locale = Locale(identifier: document.locale)
        identifier = document.identifier
        version = document.version
        phraseCounts = document.phrases.map { PhraseCount(phrase: $0.phrase, count: $0.count) }
        generators = document.templateGroups.map { TemplatePhraseCountGenerator(group: $0) }
        terms = document.pronunciations.map { CustomPronunciation(grapheme: $0.grapheme, phonemes: $0.phonemes) }
    }

    /// Encodes the exported document; data with a generator of another kind than templates
    /// cannot be encoded synchronously (use ``export(to:)``, which runs it).
    public func encode(to encoder: any Encoder) throws {
        let document = try lock.withLock {
            guard generators.allSatisfy({ $0 is TemplatePhraseCountGenerator }) else {
                throw EncodingError.invalidValue(identifier, .init(codingPath: encoder.codingPath,
                                                                   debugDescription: "a custom PhraseCountGenerator runs only in export(to:)"))
            }
            return try documentWithoutCustomGenerators()
        }
        try document.encode(to: encoder)
    }

    public static func == (lhs: SFCustomLanguageModelData, rhs: SFCustomLanguageModelData) -> Bool {
        lhs === rhs || (lhs.snapshot == rhs.snapshot)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(snapshot)
    }

    private struct Snapshot: Hashable {
        var locale: Locale
        var identifier: String
        var version: String
        var phraseCounts: [PhraseCount]
        var generators: [PhraseCountGenerator]
        var terms: [CustomPronunciation]
    }

    private var snapshot: Snapshot {
        lock.withLock { Snapshot(locale: locale, identifier: identifier, version: version, phraseCounts: phraseCounts, generators: generators, terms: terms) }
    }
}

extension SFCustomLanguageModelData {
    /// A phrase and a weight for how strongly recognition leans towards it (weights are relative
    /// within one file).
    public struct PhraseCount: Codable, Hashable, Sendable, DataInsertable {
        public let phrase: String
        public let count: Int

        public init(phrase: String, count: Int) {
            self.phrase = phrase
            self.count = count
        }

        public func insert(data: SFCustomLanguageModelData) { data.insert(phraseCount: self) }
    }

    /// How a word (`grapheme`) is said: one or more X-SAMPA strings, symbols separated by spaces.
    public struct CustomPronunciation: Codable, Hashable, Sendable, DataInsertable {
        public let grapheme: String
        public let phonemes: [String]

        public init(grapheme: String, phonemes: [String]) {
            self.grapheme = grapheme
            self.phonemes = phonemes
        }

        public func insert(data: SFCustomLanguageModelData) { data.insert(term: self) }
    }

    /// Templates over `classes` (`<name>` in a template stands for each member of class `name`).
    public struct PhraseCountsFromTemplates: DataInsertable {
        let generator: TemplatePhraseCountGenerator

        public init(classes: [String: [String]], @TemplateInsertableBuilder builder: () -> any TemplateInsertable) {
            generator = TemplatePhraseCountGenerator()
            for (name, values) in classes { generator.define(className: name, values: values) }
            builder().insert(generator: generator)
        }

        public func insert(data: SFCustomLanguageModelData) { data.insert(phraseCountGenerator: generator) }
    }

    /// A source of phrase counts (Apple's abstract base class): subclass it and override
    /// `makeAsyncIterator()`; ``SFCustomLanguageModelData/export(to:)`` runs it.
    open class PhraseCountGenerator: AsyncSequence, DataInsertable, Codable, Hashable, @unchecked Sendable {
        public typealias Element = PhraseCount

        /// Produces a generator's phrase counts; the base produces none.
        open class Iterator: AsyncIteratorProtocol {
            public init() {}
            open func next() async throws -> PhraseCount? { nil }
        }

        public init() {}

        public required init(from decoder: any Decoder) throws {}

        open func encode(to encoder: any Encoder) throws {}

        open func makeAsyncIterator() -> Iterator { Iterator() }

        public func insert(data: SFCustomLanguageModelData) { data.insert(phraseCountGenerator: self) }

        /// Whether `other` produces the same phrases (the base: only itself).
        open func isEqual(to other: PhraseCountGenerator) -> Bool { self === other }

        open func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

        public static func == (lhs: PhraseCountGenerator, rhs: PhraseCountGenerator) -> Bool { lhs.isEqual(to: rhs) }
    }

    /// Phrase counts from templates: each template's count is the total weight of its expansions.
    public final class TemplatePhraseCountGenerator: PhraseCountGenerator, @unchecked Sendable {
        // @unchecked: the classes and templates are guarded by `lock`.
        private let lock = NSLock()
        private var classes: [String: [String]] = [:]
        private var templates: [Template] = []

        /// A template string and the total weight of the phrases it expands to.
        public struct Template: Codable, Hashable, Sendable, TemplateInsertable {
            public let body: String
            public let count: Int

            public init(_ body: String, count: Int) {
                self.body = body
                self.count = count
            }

            public func insert(generator: TemplatePhraseCountGenerator) { generator.insert(template: body, count: count) }
        }

        /// Produces the templates' expansions, each with its template's count shared out (at
        /// least 1). A template that names an undefined class or expands past the daemon's bound
        /// throws.
        public final class Iterator: PhraseCountGenerator.Iterator {
            private var pending: [PhraseCount] = []
            private var remaining: [Template]
            private let templateClasses: [String: [String]]

            public init(templates: [Template], templateClasses: [String: [String]]) {
                remaining = templates
                self.templateClasses = templateClasses
            }

            public override func next() async throws -> PhraseCount? {
                while pending.isEmpty {
                    guard !remaining.isEmpty else { return nil }
                    let template = remaining.removeFirst()
                    do {
                        let expansion = try TemplateExpansion(template.body)
                        let limit = CustomLanguageModelLimits.standard.maxExpandedPhrases
                        let count = try expansion.expansions(classes: templateClasses, limit: limit)
                        let each = Swift.max(1, template.count / count)
                        expansion.forEachExpansion(classes: templateClasses) { pending.append(PhraseCount(phrase: $0, count: each)); return true }
                    } catch {
                        throw EarshotError.invalidLanguageModelData(error.description)
                    }
                }
                return pending.removeFirst()
            }
        }

        public override init() { super.init() }

        init(group: CustomLanguageModelDocument.TemplateGroup) {
            classes = group.classes
            templates = group.templates.map { Template($0.body, count: $0.count) }
            super.init()
        }

        public required init(from decoder: any Decoder) throws {
            let group = try CustomLanguageModelDocument.TemplateGroup(from: decoder)
            classes = group.classes
            templates = group.templates.map { Template($0.body, count: $0.count) }
            super.init()
        }

        public override func encode(to encoder: any Encoder) throws { try group.encode(to: encoder) }

        /// Defines the class `className` (`<className>` in a template) as `values`.
        public func define(className: String, values: [String]) {
            lock.withLock { classes[className] = values }
        }

        /// Adds a template and the total weight of its expansions.
        public func insert(template: String, count: Int) {
            lock.withLock { templates.append(Template(template, count: count)) }
        }

        public override func makeAsyncIterator() -> PhraseCountGenerator.Iterator {
            let group = group
            return Iterator(templates: group.templates.map { Template($0.body, count: $0.count) }, templateClasses: group.classes)
        }

        public override func isEqual(to other: PhraseCountGenerator) -> Bool {
            guard let other = other as? TemplatePhraseCountGenerator else { return false }
            return self === other || group == other.group
        }

        public override func hash(into hasher: inout Hasher) { hasher.combine(group) }

        /// The file's form of the generator.
        var group: CustomLanguageModelDocument.TemplateGroup {
            lock.withLock { CustomLanguageModelDocument.TemplateGroup(classes: classes, templates: templates.map { .init(body: $0.body, count: $0.count) }) }
        }
    }

    /// Several templates as one (the template builder's result; not for direct use).
    public struct CompoundTemplate: TemplateInsertable {
        let components: [any TemplateInsertable]

        public init(_ components: [any TemplateInsertable]) { self.components = components }

        public func insert(generator: TemplatePhraseCountGenerator) {
            for component in components { component.insert(generator: generator) }
        }
    }

    /// Several data items as one (the data builder's result).
    struct CompoundData: DataInsertable {
        let components: [any DataInsertable]

        func insert(data: SFCustomLanguageModelData) {
            for component in components { component.insert(data: data) }
        }
    }

    /// The result builder of ``SFCustomLanguageModelData/init(locale:identifier:version:builder:)``.
    @resultBuilder public struct DataInsertableBuilder {
        public static func buildBlock(_ components: any DataInsertable...) -> any DataInsertable { CompoundData(components: components) }
        public static func buildArray(_ components: [any DataInsertable]) -> any DataInsertable { CompoundData(components: components) }
        public static func buildEither(first component: any DataInsertable) -> any DataInsertable { component }
        public static func buildEither(second component: any DataInsertable) -> any DataInsertable { component }
        public static func buildOptional(_ component: (any DataInsertable)?) -> any DataInsertable { CompoundData(components: component.map { [$0] } ?? []) }
    }

    /// The result builder of ``PhraseCountsFromTemplates/init(classes:builder:)``.
    @resultBuilder public struct TemplateInsertableBuilder {
        public static func buildBlock(_ components: any TemplateInsertable...) -> any TemplateInsertable { CompoundTemplate(components) }
        public static func buildArray(_ components: [any TemplateInsertable]) -> any TemplateInsertable { CompoundTemplate(components) }
        public static func buildEither(first component: any TemplateInsertable) -> any TemplateInsertable { component }
        public static func buildEither(second component: any TemplateInsertable) -> any TemplateInsertable { component }
        public static func buildOptional(_ component: (any TemplateInsertable)?) -> any TemplateInsertable { CompoundTemplate(component.map { [$0] } ?? []) }
    }
}
