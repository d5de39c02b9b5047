import Earshot
import Testing
import TestSupport

/// Contextual strings and options the engines cannot honour, through the Apple-shaped API and a
/// real daemon on LibriVox 0870 ("and mister john dashwood had then leisure to consider how much
/// there might be prudently in his power …"), which PocketSphinx alone hears as "… john guess
/// would have been … prickly in his power …".
@Suite(.serialized, .enabled(if: Porting.modelsPresent, "the embedded catalog has no Whisper assets (run Scripts/setup.sh)"), .portingDaemon)
struct ContextTests {
    static let english = Locale(identifier: "en_US")
    static let dashwood = Porting.ids[0]

    @Test func contextualStringsBiasDictation() async throws {
        try await Porting.useDaemon()
        let plain = try await dictate([Porting.url(Self.dashwood)], with: DictationTranscriber(locale: Self.english, preset: .longDictation), contexts: [nil])
        let transcriber = DictationTranscriber(locale: Self.english, preset: .longDictation)
        let biased = try await dictate([Porting.url(Self.dashwood)], with: transcriber, contexts: [["Dashwood", "prudently"]])
        print("[dictation] without context: \(plain)\n[dictation] with context:    \(biased)")
        #expect(!WordErrorRate.words(plain).contains("dashwood"), "the baseline must miss the word for the test to mean anything: \(plain)")
        #expect(WordErrorRate.words(biased).contains("dashwood"), "\(biased)")
        #expect(WordErrorRate.words(biased).contains("prudently"), "\(biased)")
        #expect(try Porting.wer(biased, ids: [Self.dashwood]) < Porting.wer(plain, ids: [Self.dashwood]))
        // The preset asks for punctuation, which PocketSphinx does not produce: reported, not dropped.
        let unhonored = transcriber.unhonoredRequests
        #expect(unhonored.contains { $0.kind == .transcriptionOption && $0.value == "punctuation" && $0.module == 0 }, "\(unhonored)")
        #expect(!unhonored.contains { $0.kind == .contextualString }, "every contextual word is usable: \(unhonored)")
    }

    @Test func contextSetMidSessionReachesDictation() async throws {
        try await Porting.useDaemon()
        let transcriber = DictationTranscriber(locale: Self.english, contentHints: [], transcriptionOptions: [.emoji], reportingOptions: [], attributeOptions: [])
        let text = try await dictate([Porting.url(Porting.ids[1]), Porting.url(Self.dashwood)], with: transcriber,
                                     contexts: [nil, ["John Dashwood", "prudently", "R2-D2"]])
        print("[dictation, context set mid-session] \(text)")
        #expect(WordErrorRate.words(text).contains("dashwood"), "\(text)")
        let unhonored = transcriber.unhonoredRequests
        #expect(unhonored.contains { $0.kind == .contextualString && $0.value == "r2-d2" }, "\(unhonored)")
        #expect(unhonored.filter { $0.kind == .transcriptionOption }.map(\.value) == ["emoji"], "\(unhonored)")
        // The daemon logs the report, counting contextual words rather than naming them.
        let log = try #require(Porting.daemon).child.stderr
        #expect(log.contains("not honoured: module 0 transcription_option emoji"), "\(log)")
        #expect(log.contains("module 0: 1 contextual string(s) or word(s)"), "\(log)")
        #expect(!log.contains("r2-d2") && !log.contains("prudently"), "\(log)")
    }

    /// Whisper takes contextual strings (its prompt and a bias on its search) within their
    /// bounds; one past a bound is reported, never dropped silently.
    @Test func whisperHonoursContextualStringsWithinTheirBounds() async throws {
        try await Porting.useDaemon()
        let transcriber = SpeechTranscriber(locale: Self.english, preset: .transcription)
        try await ensureAssets(for: transcriber)
        let analyzer = SpeechAnalyzer(modules: [transcriber])
        let context = AnalysisContext()
        let overlong = String(repeating: "very long phrase ", count: 5)
        context.contextualStrings[.general] = ["Dashwood", overlong]
        try await analyzer.setContext(context)
        async let text = transcriber.results.reduce(into: "") { $0 += String($1.text.characters) }
        let last = try await analyzer.analyzeSequence(from: try AVAudioFile(forReading: Porting.url(Porting.ids[4])))
        try await analyzer.finalizeAndFinish(through: try #require(last))
        #expect(!(try await text).isEmpty)
        let unhonored = transcriber.unhonoredRequests
        #expect(unhonored.map(\.kind) == [.contextualString], "\(unhonored)")
        #expect(unhonored.first?.value == overlong)
        #expect(unhonored.first?.reason.contains("Whisper") == true)
    }
}
