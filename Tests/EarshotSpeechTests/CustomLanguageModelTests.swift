@testable import EarshotSpeech
import EarshotLanguageModel
import Foundation
import Testing
import TestSupport

/// A compiled custom language model (the seeds' chess data, 000 §11.4) interpolated with
/// PocketSphinx's base model, on chess commands spoken by two flite voices: dictation's word
/// error rate with the model is far below its rate without; a custom pronunciation is what makes
/// a word said unlike its spelling recognisable.
@Suite(.serialized, .enabled(if: EmbeddedModels.runs(PocketSphinxFixtures.available && Flite.available), "needs Debian pocketsphinx-en-us and flite"))
struct CustomLanguageModelTests {
    /// The seeds' datagenerator data, with "Winawer" said as in Polish ("vinaver").
    static func chess(pronounced: Bool) -> CustomLanguageModelDocument {
        CustomLanguageModelDocument(
            locale: "en-US", identifier: "com.example.chess", version: "1.0",
            phrases: [.init(phrase: "Play the Albin counter gambit", count: 10), .init(phrase: "Play the Winawer variation", count: 10),
                      .init(phrase: "Play the Tartakower", count: 10)],
            templateGroups: [.init(classes: ["piece": ["pawn", "rook", "knight", "bishop", "queen", "king"], "royal": ["queen", "king"],
                                             "rank": (1...8).map(String.init)],
                                   templates: [.init(body: "<piece> to <royal> <piece> <rank>", count: 10_000)])],
            pronunciations: [.init(grapheme: "Tartakower", phonemes: ["t A r t @ k aU @r"])]
                + (pronounced ? [.init(grapheme: "Winawer", phonemes: ["v i n A v @r"])] : []))
    }

    /// Commands the template covers, and two named lines.
    static let commands = [
        "knight to queen bishop three", "pawn to king rook four", "bishop to queen knight five", "rook to king pawn one",
        "queen to king bishop seven", "king to queen rook two", "pawn to queen pawn six", "knight to king knight eight",
        "play the albin counter gambit", "play the tartakower",
    ]

    /// Each of `texts` as each voice says it (`spoken` maps a text to what flite is given).
    static func speech(_ texts: [String], spoken: (String) -> String = { $0 }, in directory: TempDirectory) async throws -> [(reference: String, samples: [Float])] {
        var audio: [(String, [Float])] = []
        for voice in Flite.voices {
            for text in texts { audio.append((text, try await Flite.samples(spoken(text), voice: voice, in: directory))) }
        }
        return audio
    }

    /// `audio` decoded by a fresh decoder set up by `prepare`.
    static func decode(_ audio: [(reference: String, samples: [Float])], prepare: @escaping @Sendable (PocketSphinxDecoder) throws -> Void) async throws -> [String] {
        let samples = audio.map(\.samples)
        return try await onPocketSphinxThread {
            let decoder = try PocketSphinxDecoder(model: PocketSphinxFixtures.model())
            try prepare(decoder)
            return try samples.map { try decoder.decodeUtterance($0, alternatives: 0).text }
        }
    }

    @Test func theChessModelReadsChessCommandsFarBetter() async throws {
        let directory = try TempDirectory("eslm")
        defer { directory.remove() }
        let audio = try await Self.speech(Self.commands, in: directory)
        let compiled = try LanguageModelCompiler.compile(Self.chess(pronounced: true))
        let words = compiled.pronunciations.flatMap { word, phones in phones.map { (word: word, phones: $0) } }
        let plain = try await Self.decode(audio) { try $0.addWords(words) }
        let biased = try await Self.decode(audio) { try $0.setCustomLanguageModel(compiled) }
        let before = WordErrorRate.rate(zip(audio, plain).map { ($0.reference, $1) })
        let after = WordErrorRate.rate(zip(audio, biased).map { ($0.reference, $1) })
        for (index, entry) in audio.enumerated() { print("\(entry.reference): “\(plain[index])” → “\(biased[index])”") }
        let words_ = audio.reduce(0) { $0 + WordErrorRate.words($1.reference).count }
        print(String(format: "chess commands, %d words: WER %.1f %% without the custom model, %.1f %% with it", words_, before * 100, after * 100))
        #expect(before > 0.4)
        #expect(after < 0.15)
        #expect(after < before / 4)
    }

    /// "Winawer" spoken "vee-nah-ver": with its X-SAMPA pronunciation it is read; with the
    /// pronunciation espeak-ng guesses from its spelling (what Earshot gives a word without one),
    /// it is not.
    @Test func aCustomPronunciationMakesAWordSaidUnlikeItsSpellingRecognisable() async throws {
        let directory = try TempDirectory("eslm")
        defer { directory.remove() }
        let audio = try await Self.speech(["play the winawer variation"], spoken: { $0.replacingOccurrences(of: "winawer", with: "vee nah ver") }, in: directory)
        let pronounced = try LanguageModelCompiler.compile(Self.chess(pronounced: true))
        let unpronounced = try LanguageModelCompiler.compile(Self.chess(pronounced: false))
        let guessed = try EspeakPronouncer.phones(for: "winawer").get()
        let withPronunciation = try await Self.decode(audio) { try $0.setCustomLanguageModel(pronounced) }
        let withGuess = try await Self.decode(audio) { try $0.setCustomLanguageModel(unpronounced, adding: [("winawer", guessed)]) }
        print("with “v i n A v @r”: \(withPronunciation); with espeak-ng's “\(guessed)”: \(withGuess)")
        #expect(withPronunciation.allSatisfy { WordErrorRate.words($0).contains("winawer") })
        #expect(!withGuess.contains { WordErrorRate.words($0).contains("winawer") })
    }

    @Test func theModelComesOffAgainAndBadWeightsAreRefused() async throws {
        let compiled = try LanguageModelCompiler.compile(Self.chess(pronounced: true))
        try await onPocketSphinxThread {
            let decoder = try PocketSphinxDecoder(model: PocketSphinxFixtures.model())
            #expect(throws: PocketSphinxError.self) { try decoder.setCustomLanguageModel(compiled, weight: 1) }
            #expect(throws: PocketSphinxError.self) { try decoder.setCustomLanguageModel(compiled, adding: [("bad word", "K")]) }
            try decoder.setCustomLanguageModel(compiled)
            #expect(decoder.pronunciation(of: "winawer") == "V IY N AA V ER")
            try decoder.setContextualPhrases([["albin"]])
            try decoder.setCustomLanguageModel(nil)
            #expect(decoder.contextualPhrases == [["albin"]])
        }
    }
}
