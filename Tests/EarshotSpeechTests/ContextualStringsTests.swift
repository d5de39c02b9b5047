@testable import EarshotSpeech
import EarshotWire
import Foundation
import Testing
import TestSupport

/// Contextual strings bias PocketSphinx on real speech: LibriVox 0870 ("and mister john dashwood
/// had then leisure to consider how much there might be prudently in his power …"), which the base
/// model hears as "and mr john guess would have been at leisure … there might be prickly in his
/// power …" (measured).
@Suite(.serialized, .enabled(if: EmbeddedModels.runs(PocketSphinxFixtures.available), "needs Debian pocketsphinx-en-us and pocketsphinx-testdata"))
struct ContextualStringsTests {
    static let utterance = "sense_and_sensibility_01_austen_64kb-0870"

    /// Decodes 0870 whole once per context (nil: the decoder as it is), in order, on one stream.
    static func decode(_ stream: PocketSphinxStream, contexts: [[String]?]) throws -> [[String]] {
        let samples = try PocketSphinxFixtures.librivox(utterance)
        return try contexts.map { context in
            if let context { try stream.setContext(context) }
            return WordErrorRate.words(try stream.decodeWhole(samples, alternatives: 0).text)
        }
    }

    @Test func contextualStringsRecoverWordsTheBaseModelMisses() async throws {
        let runs = try await onPocketSphinxThread {
            try Self.decode(PocketSphinxStream(try PocketSphinxDecoder(model: PocketSphinxFixtures.model())),
                            contexts: [nil, ["Dashwood,", "prudently"], ["John Dashwood"], []])
        }
        let (plain, biased, phrase, cleared) = (runs[0], runs[1], runs[2], runs[3])
        #expect(!plain.contains("dashwood") && !plain.contains("prudently"), "\(plain)")
        #expect(biased.contains("dashwood") && biased.contains("prudently"), "\(biased)")
        #expect(phrase.contains("dashwood") && !phrase.contains("prudently"), "\(phrase)")
        #expect(cleared == plain, "an empty context returns to the base model")
    }

    /// Words the dictionary lacks get espeak-ng's pronunciation: with a dictionary without
    /// "dashwood" and "prudently", the context adds them and they are recognized.
    /// Regression: with metrics on, a session's PocketSphinx stream is wrapped in a
    /// `MeteredDecoder`, and contexts set mid-session no longer found the stream to reach.
    @Test func meteredDictationStillTakesAMidSessionContext() async throws {
        struct Observer: SpeechObserver {
            func decoded(engine: String, audioSeconds: Double, computeSeconds: Double) {}
            func speechWithoutText(session: String, range: WireTimeRange) {}
        }
        let words = try await onPocketSphinxThread { () -> [String] in
            let stream = PocketSphinxStream(try PocketSphinxDecoder(model: PocketSphinxFixtures.model()))
            let metered = MeteredDecoder(stream, engine: "pocketsphinx", observer: Observer())
            let found = try #require(PocketSphinxStream.underlying(metered))
            #expect(found === stream)
            try found.setContext(["Dashwood"])
            return WordErrorRate.words(try metered.decodeWhole(try PocketSphinxFixtures.librivox(Self.utterance), alternatives: 0).text)
        }
        #expect(words.contains("dashwood"), "\(words)")
    }

    @Test func missingWordsArePronouncedAndRecognized() async throws {
        let directory = try TempDirectory("esctx")
        defer { directory.remove() }
        let dictionary = try String(contentsOfFile: PocketSphinxFixtures.dictionary, encoding: .utf8)
            .split(separator: "\n").filter { !$0.hasPrefix("dashwood ") && !$0.hasPrefix("prudently ") }.joined(separator: "\n") + "\n"
        let path = try directory.write("reduced.dict", dictionary)
        let model = try PocketSphinxModel(acousticModel: PocketSphinxFixtures.acousticModel, languageModel: PocketSphinxFixtures.languageModel, dictionary: path)
        let (runs, pronunciation, unhonored) = try await onPocketSphinxThread {
            let stream = PocketSphinxStream(try PocketSphinxDecoder(model: model))
            let before = stream.decoder.pronunciation(of: "dashwood")
            let runs = try Self.decode(stream, contexts: [nil, ["Dashwood", "prudently"]])
            return (runs, (before, stream.decoder.pronunciation(of: "dashwood")), stream.unhonored.map(\.word))
        }
        #expect(pronunciation.0 == nil)
        #expect(pronunciation.1 == "D AE SH W UH D", "espeak-ng's pronunciation, as CMU phones (the CMU dictionary's own)")
        #expect(unhonored.isEmpty)
        #expect(!runs[0].contains("dashwood"), "\(runs[0])")
        #expect(runs[1].contains("dashwood") && runs[1].contains("prudently"), "\(runs[1])")
    }

    @Test func unusableWordsAreReportedAndTheRestUsed() async throws {
        let (runs, unhonored) = try await onPocketSphinxThread {
            let stream = PocketSphinxStream(try PocketSphinxDecoder(model: PocketSphinxFixtures.model()))
            let runs = try Self.decode(stream, contexts: [["R2-D2 Dashwood", "42", "prudently!"]])
            return (runs, stream.unhonored)
        }
        #expect(unhonored.map(\.word) == ["r2-d2", "42"])
        #expect(unhonored.allSatisfy { $0.reason.contains("only words of letters") }, "\(unhonored)")
        #expect(runs[0].contains("dashwood") && runs[0].contains("prudently"), "\(runs[0])")
    }

    /// espeak-ng's pronunciations, mapped to CMU phones, against the CMU dictionary on the words
    /// of the LibriVox references (measured: 46 of 48 identical; "even" and "married" differ).
    @Test func espeakPronunciationsMostlyMatchTheDictionary() async throws {
        let words = Set(try WordErrorRate.librivoxReferences().values.flatMap { WordErrorRate.words($0) }).sorted()
        let (matches, misses) = try await onPocketSphinxThread {
            let decoder = try PocketSphinxDecoder(model: PocketSphinxFixtures.model())
            var matches = 0
            var misses: [String] = []
            for word in words {
                let espeak = try EspeakPronouncer.phones(for: word).get()
                var known: [String] = []
                while let phones = decoder.pronunciation(of: known.isEmpty ? word : "\(word)(\(known.count + 1))") { known.append(phones) }
                if known.contains(espeak) { matches += 1 } else { misses.append("\(word): \(espeak) vs \(known.first ?? "-")") }
            }
            return (matches, misses)
        }
        let rate = Double(matches) / Double(words.count)
        print(String(format: "espeak-ng vs CMU dictionary: %d/%d words identical (%.0f %%)", matches, words.count, rate * 100))
        for miss in misses { print("  \(miss)") }
        #expect(rate >= 0.85)
    }

    @Test func whatEachEngineCannotHonourIsListed() {
        let dictation = ModuleConfiguration(kind: .dictation, locale: "en-US", transcriptionOptions: ["punctuation", "emoji"], contentHints: ["shortForm"])
        let context = AnalysisContextData(contextualStrings: ["general": ["Dashwood"]])
        let forDictation = EngineCapabilities.unhonored(dictation, engine: "pocketsphinx", module: 1, context: context, unusableWords: [("r2-d2", "why")])
        #expect(forDictation.map(\.kind) == [.transcriptionOption, .transcriptionOption, .contextualString])
        #expect(forDictation.map(\.value) == ["punctuation", "emoji", "r2-d2"], "content hints chose the asset: not reported")
        #expect(forDictation.allSatisfy { $0.module == 1 })
        let transcriber = ModuleConfiguration(kind: .transcriber, locale: "en-US", transcriptionOptions: ["translate", "etiquetteReplacements"])
        let forWhisper = EngineCapabilities.unhonored(transcriber, engine: "sherpa-onnx-whisper", module: 0, context: context, unusableWords: [])
        #expect(forWhisper.map(\.value) == ["etiquetteReplacements"], "translate and the contextual string are honoured")
        let long = String(repeating: "x", count: WhisperContext.maxPhraseCharacters + 1)
        let bounded = EngineCapabilities.unhonored(transcriber, engine: "sherpa-onnx-whisper", module: 0,
                                                   context: AnalysisContextData(contextualStrings: ["general": ["Dashwood", long]]), unusableWords: [])
        #expect(bounded.map(\.value) == ["etiquetteReplacements", long], "a phrase past its bound is reported")
        let prompted = EngineCapabilities.unhonored(dictation, engine: "pocketsphinx", module: 1, context: AnalysisContextData(),
                                                    decoding: DecodingOptions(prompt: "Dashwood", beamSize: 3), unusableWords: [])
        #expect(prompted.filter { $0.kind == .decodingOption }.map(\.value) == ["prompt", "beam_size"], "PocketSphinx takes no decoding options")
        #expect(EngineCapabilities.unhonored(ModuleConfiguration(kind: .detector, locale: nil), engine: "sherpa-onnx-silero-vad", module: 2,
                                             context: context, unusableWords: []).isEmpty)
    }
}

extension ContextualStringsTests {
    /// A context is bounded: words beyond the thousandth distinct one are reported, not used.
    @Test func contextsAreBoundedAtAThousandWords() async throws {
        let words = try String(contentsOfFile: PocketSphinxFixtures.dictionary, encoding: .utf8).split(separator: "\n")
            .compactMap { $0.split(separator: " ").first.map(String.init) }.filter { !$0.contains("(") && $0.allSatisfy(\.isLetter) }.prefix(1002)
        let unhonored = try await onPocketSphinxThread {
            let stream = PocketSphinxStream(try PocketSphinxDecoder(model: PocketSphinxFixtures.model()))
            return try stream.setContext([words.joined(separator: " ")]).map(\.word)
        }
        #expect(unhonored == Array(words.suffix(2)))
    }
}

extension ContextualStringsTests {
    /// Streaming (volatile results): a context that arrives during an utterance is used from the
    /// next one; the open utterance keeps the model it started with.
    @Test func aContextSetDuringAnUtteranceAppliesFromTheNext() async throws {
        let samples = try PocketSphinxFixtures.librivox(Self.utterance)
        let (during, next) = try await onPocketSphinxThread {
            let stream = PocketSphinxStream(try PocketSphinxDecoder(model: PocketSphinxFixtures.model()))
            func streamed(setting context: [String]? = nil) throws -> [String] {
                try stream.startUtterance()
                for start in stride(from: 0, to: samples.count, by: 1600) {
                    try stream.process(Array(samples[start..<min(start + 1600, samples.count)]))
                    if start == 16000, let context { try stream.setContext(context) }
                }
                return WordErrorRate.words(try stream.endUtterance(alternatives: 0).text)
            }
            return (try streamed(setting: ["Dashwood", "prudently"]), try streamed())
        }
        #expect(!during.contains("dashwood"), "\(during)")
        #expect(next.contains("dashwood"), "\(next)")
    }
}
