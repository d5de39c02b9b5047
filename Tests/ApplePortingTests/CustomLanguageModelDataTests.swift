import Earshot
import Foundation
import Testing
import TestSupport

/// Apple's custom language model DSL (000 §11.3–11.4) as Earshot's client library has it: the
/// seeds' datagenerator compiles with its import changed, runs, and writes the file the daemon
/// reads; bad data fails at export, on the developer's machine.
@Suite struct CustomLanguageModelDataTests {
    /// The file's JSON object.
    static func object(_ url: URL) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
    }

    @Test func theSeedsDatageneratorWritesItsDataUnexpanded() async throws {
        let directory = try TempDirectory("eslm")
        defer { directory.remove() }
        let url = URL(fileURLWithPath: directory.file("CustomLMData (en_US).bin"))
        try await datagenerator(outputURL: url)
        let file = try Self.object(url)
        #expect(file["format"] as? String == "earshot-custom-language-model")
        #expect(file["formatVersion"] as? Int == 1)
        #expect(file["locale"] as? String == "en-US")
        #expect(file["identifier"] as? String == "com.example.chess")
        #expect((file["phrases"] as? [Any])?.count == 3)
        let groups = try #require(file["templateGroups"] as? [[String: Any]])
        #expect(groups.count == 1)
        #expect((groups[0]["templates"] as? [[String: Any]])?.first?["body"] as? String == "<piece> to <royal> <piece> <rank>")
        #expect((file["pronunciations"] as? [Any])?.count == 2)

        // Read back through Codable: the same data, its templates a generator again.
        let decoded = try JSONDecoder().decode(SFCustomLanguageModelData.self, from: Data(contentsOf: url))
        #expect(decoded.identifier == "com.example.chess" && decoded.version == "1.0")
        let again = URL(fileURLWithPath: directory.file("again.bin"))
        try await decoded.export(to: again)
        #expect(try Data(contentsOf: again) == Data(contentsOf: url))
        #expect(decoded == (try JSONDecoder().decode(SFCustomLanguageModelData.self, from: Data(contentsOf: again))))
    }

    @Test func templatesExpandToTheirPhrasesWithTheCountSharedOut() async throws {
        let data = SFCustomLanguageModelData.PhraseCountsFromTemplates(classes: ["piece": ["pawn", "rook", "knight", "bishop", "queen", "king"],
                                                                                "royal": ["queen", "king"], "rank": Array(1...8).map({ String($0) })]) {
            SFCustomLanguageModelData.TemplatePhraseCountGenerator.Template("<piece> to <royal> <piece> <rank>", count: 10_000)
        }
        let generator = SFCustomLanguageModelData.TemplatePhraseCountGenerator()
        generator.define(className: "piece", values: ["pawn", "rook", "knight", "bishop", "queen", "king"])
        generator.define(className: "royal", values: ["queen", "king"])
        generator.define(className: "rank", values: Array(1...8).map({ String($0) }))
        generator.insert(template: "<piece> to <royal> <piece> <rank>", count: 10_000)
        var phrases: [SFCustomLanguageModelData.PhraseCount] = []
        for try await phrase in generator { phrases.append(phrase) }
        #expect(phrases.count == 576)
        #expect(phrases.first == .init(phrase: "pawn to queen pawn 1", count: 17))
        #expect(phrases.last == .init(phrase: "king to king king 8", count: 17))
        let container = SFCustomLanguageModelData(locale: Locale(identifier: "en_US"), identifier: "a", version: "1")
        data.insert(data: container)
        let other = SFCustomLanguageModelData(locale: Locale(identifier: "en_US"), identifier: "a", version: "1")
        other.insert(phraseCountGenerator: generator)
        #expect(container == other)
    }

    /// A generator of the app's own runs at export; its phrases join the file's.
    @Test func aCustomGeneratorRunsAtExport() async throws {
        final class Openings: SFCustomLanguageModelData.PhraseCountGenerator, @unchecked Sendable {
            final class Each: SFCustomLanguageModelData.PhraseCountGenerator.Iterator {
                var names = ["Sicilian", "French", "Caro-Kann"]
                override func next() async throws -> SFCustomLanguageModelData.PhraseCount? {
                    names.isEmpty ? nil : .init(phrase: "play the \(names.removeFirst()) defence", count: 5)
                }
            }
            override func makeAsyncIterator() -> SFCustomLanguageModelData.PhraseCountGenerator.Iterator { Each() }
        }
        let directory = try TempDirectory("eslm")
        defer { directory.remove() }
        let url = URL(fileURLWithPath: directory.file("openings.bin"))
        try await imperativeData(locale: Locale(identifier: "en_US"), someGenerator: Openings(), outputURL: url)
        let phrases = try #require(try Self.object(url)["phrases"] as? [[String: Any]])
        #expect(phrases.map { $0["phrase"] as? String } == ["Play the Albin counter gambit", "play the Sicilian defence", "play the French defence", "play the Caro-Kann defence"])
        let data = SFCustomLanguageModelData(locale: Locale(identifier: "en_US"), identifier: "x", version: "1")
        data.insert(phraseCountGenerator: Openings())
        #expect(throws: EncodingError.self) { try JSONEncoder().encode(data) }
    }

    @Test func badDataFailsAtExportAndWritesNothing() async throws {
        let directory = try TempDirectory("eslm")
        defer { directory.remove() }
        let url = URL(fileURLWithPath: directory.file("bad.bin"))
        let unsupported = SFCustomLanguageModelData(locale: Locale(identifier: "en_US"), identifier: "x", version: "1") {
            SFCustomLanguageModelData.CustomPronunciation(grapheme: "Bach", phonemes: ["b A x"])
        }
        await #expect(throws: EarshotError.self) { try await unsupported.export(to: url) }
        let bomb = SFCustomLanguageModelData(locale: Locale(identifier: "en_US"), identifier: "x", version: "1") {
            SFCustomLanguageModelData.PhraseCountsFromTemplates(classes: Dictionary(uniqueKeysWithValues: (0..<8).map { ("c\($0)", (0..<50).map { "w\($0)" }) })) {
                SFCustomLanguageModelData.TemplatePhraseCountGenerator.Template((0..<8).map { "<c\($0)>" }.joined(separator: " "), count: 1)
            }
        }
        do {
            try await bomb.export(to: url)
            Issue.record("a template of 50^8 phrases was exported")
        } catch let error as EarshotError {
            #expect(error.description == "custom language model data: phrases the templates expand to past the limit of 200000")
        }
        let undefined = SFCustomLanguageModelData(locale: Locale(identifier: "en_US"), identifier: "x", version: "1") {
            SFCustomLanguageModelData.PhraseCountsFromTemplates(classes: [:]) {
                SFCustomLanguageModelData.TemplatePhraseCountGenerator.Template("move to <square>", count: 1)
            }
        }
        await #expect(throws: EarshotError.self) { try await undefined.export(to: url) }
        #expect(!FileManager.default.fileExists(atPath: url.path))
        checkPronunciations([.init(grapheme: "Winawer", phonemes: ["w I n aU @r"])], locale: Locale(identifier: "en_US"))
        #expect(SFCustomLanguageModelData.supportedPhonemes(locale: Locale(identifier: "fr_FR")).isEmpty)
    }
}
