import EarshotLanguageModel
import Foundation
import Testing

/// The compiled trigram model: a proper distribution after every context, phrases weighted by
/// their counts, numbers spelled, pronunciations as CMU phones.
@Suite struct LanguageModelCompilerTests {
    /// An ARPA model read back: log10 probabilities and back-off weights by n-gram.
    struct ARPA {
        var probability: [[String]: Double] = [:]
        var backoff: [[String]: Double] = [:]
        var unigrams: [String] = []

        init(_ text: String) {
            for line in text.split(separator: "\n") where !line.hasPrefix("\\") && !line.hasPrefix("ngram") {
                let fields = line.split(separator: " ").map(String.init)
                guard let logProbability = Double(fields[0]) else { continue }
                // An n-gram line: probability, n words, and maybe a back-off weight.
                let rest = Array(fields.dropFirst())
                let words = Double(rest.last!) == nil ? rest : Array(rest.dropLast())
                probability[words] = logProbability
                if words.count < rest.count { backoff[words] = Double(rest.last!)! }
                if words.count == 1 { unigrams.append(words[0]) }
            }
        }

        /// P(word | context) by the back-off rule.
        func p(_ word: String, after context: [String]) -> Double {
            if let value = probability[context + [word]] { return pow(10, value) }
            guard !context.isEmpty else { return 0 }
            return pow(10, backoff[context] ?? 0) * p(word, after: Array(context.dropFirst()))
        }
    }

    static let document = CustomLanguageModelDocument(
        locale: "en-US", identifier: "chess", version: "1",
        phrases: [.init(phrase: "Play the Albin counter-gambit!", count: 10), .init(phrase: "resign", count: 1)],
        templateGroups: [.init(classes: ["piece": ["pawn", "rook", "knight"], "rank": ["1", "8"]],
                               templates: [.init(body: "<piece> to <rank>", count: 600)])],
        pronunciations: [.init(grapheme: "Albin", phonemes: ["\"{ l b I n", "\"O l b I n"])])

    @Test func everyContextIsAProperDistribution() throws {
        let compiled = try LanguageModelCompiler.compile(Self.document)
        let arpa = ARPA(compiled.arpa)
        let predicted = arpa.unigrams.filter { $0 != "<s>" }
        #expect(Set(predicted) == Set(compiled.words + ["</s>"]))
        let contexts = Set(arpa.probability.keys.filter { $0.count >= 2 }.map { Array($0.dropLast()) }) .union([[], ["<s>"], ["play"], ["zzz"]])
        for context in contexts {
            let total = predicted.reduce(0) { $0 + arpa.p($1, after: context) }
            #expect(abs(total - 1) < 1e-4, "P(·|\(context)) sums to \(total)")
        }
        // Weighted: after "to", the template's ranks; the 600-weight template's phrases outweigh "resign".
        #expect(arpa.p("eight", after: ["knight", "to"]) > 0.4)
        #expect(arpa.p("pawn", after: ["<s>"]) > arpa.p("resign", after: ["<s>"]))
        #expect(arpa.p("the", after: ["<s>", "play"]) > 0.5)
    }

    @Test func phrasesBecomeDictionaryWords() {
        #expect(LanguageModelCompiler.words(of: "Play the Albin counter-gambit!") == ["play", "the", "albin", "counter", "gambit"])
        #expect(LanguageModelCompiler.words(of: "knight to 8, 'rook' 21 or 105; 1,000") == ["knight", "to", "eight", "rook", "twenty", "one", "or", "one", "hundred", "five", "one", "thousand"])
        #expect(LanguageModelCompiler.words(of: "don't 7000 007") == ["don't", "seven", "thousand", "zero", "zero", "seven"])
    }

    /// For a decoder that biases towards phrases: heaviest phrases first, then pronounced words,
    /// then class members; numbers and repeats left out.
    @Test func biasPhrasesPutTheMostTellingFirst() {
        var document = Self.document
        document.phrases.append(.init(phrase: "RESIGN", count: 1))
        #expect(document.biasPhrases == ["Play the Albin counter-gambit!", "resign", "Albin", "pawn", "rook", "knight"])
    }

    @Test func pronunciationsBecomePhonesAndEmptyDataIsRefused() throws {
        let compiled = try LanguageModelCompiler.compile(Self.document)
        #expect(compiled.pronunciations == ["albin": ["AE L B IH N", "AO L B IH N"]])
        let empty = CustomLanguageModelDocument(locale: "en-US", identifier: "x", version: "1", phrases: [.init(phrase: "!!!", count: 1)])
        #expect(throws: CustomLanguageModelError.invalid("the data", "has no phrases with words")) { try LanguageModelCompiler.compile(empty) }
    }
}

/// Recognized words given back as the model's phrases wrote them.
@Suite struct WrittenFormsTests {
    static let forms = try! LanguageModelCompiler.compile(CustomLanguageModelDocument(
        locale: "en-US", identifier: "chess", version: "1",
        phrases: [.init(phrase: "Play the Albin counter-gambit", count: 1), .init(phrase: "pay 1,000 now", count: 1), .init(phrase: "resign", count: 1)],
        templateGroups: [.init(classes: ["piece": ["pawn", "knight"], "rank": ["3", "8"]], templates: [.init(body: "<piece> to <rank>", count: 4)])])).writtenForms

    static func texts(_ words: String) -> [String] {
        forms.rewrite(words.split(separator: " ").map(String.init)).map(\.text)
    }

    @Test func aRunThatSpellsAPhraseIsWrittenAsThePhraseWroteIt() {
        #expect(Self.texts("knight to eight") == ["knight", "to", "8"])
        #expect(Self.texts("play the albin counter gambit") == ["Play", "the", "Albin", "counter-gambit"])
        #expect(Self.texts("ok knight to three then pawn to eight") == ["ok", "knight", "to", "3", "then", "pawn", "to", "8"])
        // Each written word spans the words it was spelled as.
        #expect(Self.forms.rewrite(["please", "pay", "one", "thousand", "now"]).map(\.range) == [0..<1, 1..<2, 2..<4, 4..<5])
        #expect(Self.texts("please pay one thousand now") == ["please", "pay", "1,000", "now"])
    }

    @Test func wordsOutsideAPhraseStayAsRecognized() {
        #expect(Self.texts("i have three cats") == ["i", "have", "three", "cats"])
        #expect(Self.texts("knight to") == ["knight", "to"])
        #expect(Self.texts("resign") == ["resign"])
        #expect(Self.forms.rewrite([]).isEmpty)
    }
}
