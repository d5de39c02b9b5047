import EarshotWire
import Foundation
import Testing
import TestSupport

/// Whisper base through the real daemon and CLI: languages identified per segment
/// (`--locale auto`), a named language, translation to English, and per-locale reservations of the
/// one multilingual asset.
@Suite(.serialized, .speechDaemon(config: "[Assets]\nMaxReservedLocales=5\n", modules: ["transcriber"]))
struct SpeechLanguageTests {
    struct Document: Decodable {
        struct Segment: Decodable {
            var text: String
            var language: String?
        }
        var file: String
        var text: String
        var language: String?
        var segments: [Segment]
    }

    /// `earshot transcribe ARGS --json FILES`: one document per file.
    static func transcribe(_ files: [String], _ arguments: [String]) async throws -> [Document] {
        let daemon = try SpeechDaemon.shared()
        let run = try await ChildProcess.run(BuiltProducts.path("earshot"), ["--socket", daemon.socket, "transcribe"] + arguments + ["--json"] + files,
                                             in: daemon.directory, timeout: .seconds(180))
        try #require(run.status == 0, "earshot transcribe \(arguments) failed: \(run.stderr)")
        var documents: [Document] = []
        var current = ""
        for line in run.stdout.split(separator: "\n", omittingEmptySubsequences: false) {
            current += line + "\n"
            if line == "}" {
                documents.append(try JSONDecoder().decode(Document.self, from: Data(current.utf8)))
                current = ""
            }
        }
        try #require(documents.count == files.count, "expected \(files.count) documents: \(run.stdout)")
        return documents
    }

    @Test(.enabled(if: SpeechFixtures.multilingualAvailable, "needs Whisper base and espeak-ng (Scripts/setup.sh)"))
    func localeAutoIdentifiesEachLanguageAndReportsItInTheJSON() async throws {
        let directory = try TempDirectory("eslang")
        defer { directory.remove() }
        var files: [String] = []
        for speech in SynthesizedSpeech.all { files.append(try await speech.wav(in: directory)) }
        files.append(SpeechFixtures.path(SpeechFixtures.ids[0]))
        let documents = try await Self.transcribe(files, ["--locale", "auto"])
        for (document, speech) in zip(documents, SynthesizedSpeech.all) {
            print("[auto] \(speech.language) → \(document.language ?? "nil"): \(document.text)")
            #expect(document.language == speech.language)
            #expect(document.segments.allSatisfy { $0.language == speech.language })
            let words = SynthesizedSpeech.words(document.text)
            for word in speech.contentWords { #expect(words.contains(word), "\(word) in \(document.text)") }
        }
        #expect(documents.last?.language == "en", "LibriVox is English")
    }

    @Test(.enabled(if: SpeechFixtures.multilingualAvailable, "needs Whisper base and espeak-ng (Scripts/setup.sh)"))
    func translateGivesEnglishTextForSpanishAndGermanSpeech() async throws {
        let directory = try TempDirectory("estr")
        defer { directory.remove() }
        let speeches = [SynthesizedSpeech.spanish, .german]
        var files: [String] = []
        for speech in speeches { files.append(try await speech.wav(in: directory)) }
        let documents = try await Self.transcribe(files, ["--locale", "auto", "--translate"])
        for (document, speech) in zip(documents, speeches) {
            print("[translate] \(speech.language) → \(document.text)")
            let words = SynthesizedSpeech.words(document.text)
            #expect(speech.englishWords.filter(words.contains).count >= 2, "\(speech.englishWords) in \(document.text)")
            #expect(document.language == speech.language, "the language spoken is still reported")
        }
    }

    @Test func dictationCannotTranslateAndSaysSo() async throws {
        let daemon = try SpeechDaemon.shared()
        let run = try await ChildProcess.run(BuiltProducts.path("earshot"), ["--socket", daemon.socket, "transcribe", "--module", "dictation", "--translate",
                                                                           SpeechFixtures.path(SpeechFixtures.ids[0])], in: daemon.directory)
        #expect(run.status == 64, "a usage error")
        #expect(run.stderr.contains("dictation cannot translate"), "\(run.stderr)")
    }

    @Test(.enabled(if: SpeechFixtures.whisperAvailable, SpeechFixtures.whisperMissing))
    func germanAndFrenchReservationsShareTheOneInstalledAsset() async throws {
        let daemon = try SpeechDaemon.shared()
        for locale in ["de", "fr-FR"] {
            let run = try await ChildProcess.run(BuiltProducts.path("earshot"), ["--socket", daemon.socket, "install", "--locale", locale, "--module", "transcriber", "--json"],
                                                 in: daemon.directory)
            #expect(run.status == 2, "already installed: nothing to do (\(run.stderr))")
        }
        let listing = try await ChildProcess.run(BuiltProducts.path("earshot"), ["--socket", daemon.socket, "reservations", "--json"], in: daemon.directory)
        #expect(listing.status == 0)
        for locale in ["\"de\"", "\"fr\"", "\"en-US\""] { #expect(listing.stdout.contains(locale), "\(locale) in \(listing.stdout)") }
        let monitor = try TestConnection(daemon.socket)
        defer { monitor.close() }
        let base = try await monitor.assets().assets.filter { $0.id == "whisper-base" }
        #expect(base.count == 1, "one copy serves en-US, de and fr: \(base)")
    }

    /// A rare name through the CLI: `--context` makes Whisper write it, and the `--json` segments
    /// carry the decoder's measures; `--prompt`, `--beam` and `--temperature` are taken.
    @Test(.enabled(if: SpeechFixtures.multilingualAvailable, "needs Whisper base and espeak-ng (Scripts/setup.sh)"))
    func contextPromptAndBeamReachWhisperFromTheCommandLine() async throws {
        let daemon = try SpeechDaemon.shared()
        let directory = try TempDirectory("esctx")
        defer { directory.remove() }
        let file = try await SynthesizedSpeech(language: "en-us", text: "The patient was given Xarelto before the surgery.", rate: 150).wav(in: directory)
        func run(_ arguments: [String]) async throws -> (text: String, json: [String: Any]) {
            let run = try await ChildProcess.run(BuiltProducts.path("earshot"), ["--socket", daemon.socket, "transcribe", "--locale", "en-US", "--json"] + arguments + [file],
                                                 in: daemon.directory, timeout: .seconds(180))
            try #require(run.status == 0, "\(arguments): \(run.stderr)")
            let json = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
            return (json["text"] as? String ?? "", json)
        }
        let plain = try await run([])
        let biased = try await run(["--context", "Xarelto"])
        print("[context] alone: \(plain.text) | --context Xarelto: \(biased.text)")
        #expect(!SynthesizedSpeech.words(plain.text).contains("xarelto"))
        #expect(SynthesizedSpeech.words(biased.text).contains("xarelto"))
        let segment = try #require((biased.json["segments"] as? [[String: Any]])?.first)
        let decoding = try #require(segment["decoding"] as? [String: Any], "\(segment)")
        #expect((decoding["avg_logprob"] as? Double ?? 1) < 0 && (decoding["tokens"] as? [Int])?.isEmpty == false, "\(decoding)")
        let prompted = try await run(["--prompt", "Xarelto, the anticoagulant.", "--beam", "2", "--temperature", "0"])
        #expect(SynthesizedSpeech.words(prompted.text).contains("xarelto"), "\(prompted.text)")
    }

    /// Decoding options out of range are refused before any audio is sent.
    @Test func badDecodingOptionsAreRefusedByTheCommandLine() async throws {
        let daemon = try SpeechDaemon.shared()
        for (arguments, message) in [(["--beam", "0"], "--beam needs"), (["--beam", "17"], "--beam needs"), (["--temperature", "1.5"], "--temperature needs"),
                                     (["--temperature", "hot"], "--temperature needs")] {
            let run = try await ChildProcess.run(BuiltProducts.path("earshot"), ["--socket", daemon.socket, "transcribe"] + arguments + [SpeechFixtures.path(SpeechFixtures.ids[0])],
                                                 in: daemon.directory)
            #expect(run.status == 64 && run.stderr.contains(message), "\(arguments): \(run.status) \(run.stderr)")
        }
    }

    /// One loaded copy of Whisper base serves English, identification and translation: language
    /// and task travel with each decode (issue 29: there were five copies after a day's use).
    @Test(.enabled(if: SpeechFixtures.multilingualAvailable, "needs Whisper base and espeak-ng (Scripts/setup.sh)"))
    func oneLoadedCopyServesEveryLanguageAndTask() async throws {
        let directory = try TempDirectory("escopy")
        defer { directory.remove() }
        let spanish = try await SynthesizedSpeech.spanish.wav(in: directory)
        _ = try await Self.transcribe([SpeechFixtures.path(SpeechFixtures.ids[0])], ["--locale", "en-US"])
        _ = try await Self.transcribe([spanish], ["--locale", "auto"])
        _ = try await Self.transcribe([spanish], ["--locale", "auto", "--translate"])
        _ = try await Self.transcribe([spanish], ["--locale", "es"])
        let stats = try await TestConnection.stats(of: try SpeechDaemon.shared().socket)
        let copies = stats.models.filter { $0.key.hasPrefix("whisper-base@") && $0.key.hasSuffix("/threads=2") }
        print("[models] \(stats.models.map(\.key))")
        #expect(copies.count == 1, "\(stats.models.map(\.key))")
        #expect(!stats.models.contains { $0.key.contains("/en/") || $0.key.contains("/translate/") || $0.key.contains("/und/") })
    }
}
