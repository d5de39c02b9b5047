import EarshotLanguageModel
import Foundation
import Testing

/// The custom language model file: round trip, strict reading, bounds counted before expansion,
/// and X-SAMPA symbols checked against the locale.
@Suite struct CustomLanguageModelDocumentTests {
    static let chess = CustomLanguageModelDocument(
        locale: "en-US", identifier: "com.example.chess", version: "1.0",
        phrases: [.init(phrase: "Play the Albin counter gambit", count: 10)],
        templateGroups: [.init(classes: ["piece": ["pawn", "rook", "knight", "bishop", "queen", "king"], "royal": ["queen", "king"],
                                         "rank": (1...8).map(String.init)],
                               templates: [.init(body: "<piece> to <royal> <piece> <rank>", count: 10_000)])],
        pronunciations: [.init(grapheme: "Winawer", phonemes: ["w I n aU @r"])])

    /// The JSON of `document` with `edit` applied to its top-level object.
    static func json(_ document: CustomLanguageModelDocument = chess, _ edit: (inout [String: Any]) -> Void) throws -> Data {
        var object = try #require(try JSONSerialization.jsonObject(with: try document.encoded()) as? [String: Any])
        edit(&object)
        return try JSONSerialization.data(withJSONObject: object)
    }

    @Test func aDocumentRoundTripsThroughItsFile() throws {
        let data = try Self.chess.encoded()
        #expect(try CustomLanguageModelDocument.read(data) == Self.chess)
        let text = try #require(String(data: data, encoding: .utf8))
        #expect(text.contains("\"format\" : \"earshot-custom-language-model\""))
        #expect(text.contains("\"formatVersion\" : 1"))
    }

    @Test func otherFormatsVersionsAndUnknownKeysAreRefused() throws {
        #expect(throws: CustomLanguageModelError.unsupportedFormat("something-else")) {
            try CustomLanguageModelDocument.read(try Self.json { $0["format"] = "something-else" })
        }
        #expect(throws: CustomLanguageModelError.unsupportedVersion(2)) {
            try CustomLanguageModelDocument.read(try Self.json { $0["formatVersion"] = 2 })
        }
        #expect(throws: CustomLanguageModelError.malformed("unknown key \"weights\"")) {
            try CustomLanguageModelDocument.read(try Self.json { $0["weights"] = [1, 2] })
        }
        #expect(throws: CustomLanguageModelError.malformed("unknown key \"phrases.[0].weight\"")) {
            try CustomLanguageModelDocument.read(try Self.json { $0["phrases"] = [["phrase": "a b", "count": 1, "weight": 2]] })
        }
        #expect(throws: CustomLanguageModelError.self) { try CustomLanguageModelDocument.read(Data("{\"format\":".utf8)) }
        #expect(throws: CustomLanguageModelError.unsupportedFormat("(none)")) { try CustomLanguageModelDocument.read(Data("{}".utf8)) }
        let truncated = try Self.chess.encoded().prefix(100)
        #expect(throws: CustomLanguageModelError.self) { try CustomLanguageModelDocument.read(Data(truncated)) }
    }

    @Test func hostileValuesAreTypedErrors() throws {
        var document = Self.chess
        document.phrases = [.init(phrase: "x", count: 0)]
        #expect(throws: CustomLanguageModelError.invalid("phrases[0]", "count 0 is not in 1…1000000000")) { try document.encoded() }
        document.phrases = [.init(phrase: String(repeating: "a", count: 300), count: 1)]
        #expect(throws: CustomLanguageModelError.limitExceeded("phrases[0].phrase length", limit: 256)) { try document.encoded() }
        document.phrases = [.init(phrase: "line\nbreak", count: 1)]
        #expect(throws: CustomLanguageModelError.invalid("phrases[0].phrase", "contains control characters")) { try document.encoded() }
        document = Self.chess
        document.locale = "??"
        #expect(throws: CustomLanguageModelError.self) { try document.encoded() }
        document = Self.chess
        document.templateGroups[0].templates = [.init(body: "<piece> to <square>", count: 1)]
        #expect(throws: CustomLanguageModelError.undefinedClass(template: "<piece> to <square>", className: "square")) { try document.encoded() }
        document.templateGroups[0].templates = [.init(body: "<piece to", count: 1)]
        #expect(throws: CustomLanguageModelError.invalid("template \"<piece to\"", "has a \"<\" with no \">\"")) { try document.encoded() }
        var big = CustomLanguageModelLimits()
        big.maxFileBytes = 1_000
        #expect(throws: CustomLanguageModelError.limitExceeded("file size", limit: 1_000)) {
            try CustomLanguageModelDocument.read(Data(repeating: 0x20, count: 1_001), limits: big)
        }
    }

    /// A cross-product bomb: ten classes of a hundred members in one template is 10^20 phrases,
    /// refused from the class sizes alone (an overflow of Int is refused the same way).
    @Test func aTemplateBombIsRefusedBeforeItIsExpanded() throws {
        let classes = Dictionary(uniqueKeysWithValues: (0..<10).map { ("c\($0)", (0..<100).map { "w\($0)" }) })
        let body = (0..<10).map { "<c\($0)>" }.joined(separator: " ")
        var document = Self.chess
        document.templateGroups = [.init(classes: classes, templates: [.init(body: body, count: 1)])]
        #expect(throws: CustomLanguageModelError.limitExceeded("phrases the templates expand to", limit: 200_000)) { try document.encoded() }
        // Many groups each under the bound together pass it.
        let group = CustomLanguageModelDocument.TemplateGroup(classes: ["a": (0..<1_000).map { "a\($0)" }, "b": (0..<100).map { "b\($0)" }],
                                                              templates: [.init(body: "<a> <b>", count: 1)])
        document.templateGroups = [group, group, group]
        #expect(throws: CustomLanguageModelError.limitExceeded("phrases the templates expand to", limit: 200_000)) { try document.encoded() }
        document.templateGroups = [group, group]
        _ = try document.encoded()
    }

    @Test func templatesExpandInOrderAndCountFirst() throws {
        let template = try TemplateExpansion("<piece> to <rank>!")
        let classes = ["piece": ["pawn", "rook"], "rank": ["1", "2", "3"]]
        #expect(try template.expansions(classes: classes, limit: 100) == 6)
        var phrases: [String] = []
        template.forEachExpansion(classes: classes) { phrases.append($0); return true }
        #expect(phrases == ["pawn to 1!", "pawn to 2!", "pawn to 3!", "rook to 1!", "rook to 2!", "rook to 3!"])
        #expect(template.longestExpansion(classes: classes) == "pawn to 1!".count)
        var first: [String] = []
        template.forEachExpansion(classes: classes) { first.append($0); return first.count < 2 }
        #expect(first.count == 2)
        #expect(throws: CustomLanguageModelError.limitExceeded("phrases the templates expand to", limit: 5)) { try template.expansions(classes: classes, limit: 5) }
        #expect(try TemplateExpansion("no classes").expansions(classes: [:], limit: 1) == 1)
    }

    @Test func xsampaMapsToTheDictionarysPhonesForEnglishOnly() throws {
        #expect(try XSAMPA.phones(of: "w I n aU @r", grapheme: "Winawer", locale: "en-US") == ["W", "IH", "N", "AW", "ER"])
        #expect(try XSAMPA.phones(of: "t A r t @ k aU @r", grapheme: "Tartakower", locale: "en-GB") == ["T", "AA", "R", "T", "AH", "K", "AW", "ER"])
        #expect(try XSAMPA.phones(of: "\" b { t l=", grapheme: "battle", locale: "en-US") == ["B", "AE", "T", "AH", "L"])
        #expect(throws: CustomLanguageModelError.unsupportedPhoneme("x", grapheme: "Bach", locale: "en-US")) {
            try XSAMPA.phones(of: "b A x", grapheme: "Bach", locale: "en-US")
        }
        #expect(throws: CustomLanguageModelError.unsupportedPhoneme("b", grapheme: "Bach", locale: "fr-FR")) {
            try XSAMPA.phones(of: "b A k", grapheme: "Bach", locale: "fr-FR")
        }
        #expect(XSAMPA.supportedSymbols(locale: "en-US").contains("@r"))
        #expect(XSAMPA.supportedSymbols(locale: "de-DE").isEmpty)
        var document = Self.chess
        document.pronunciations = [.init(grapheme: "Bach", phonemes: ["b A x"])]
        #expect(throws: CustomLanguageModelError.unsupportedPhoneme("x", grapheme: "Bach", locale: "en-US")) { try document.encoded() }
    }
}
