import Earshot
import EarshotWire
import Foundation
import Testing
import TestSupport

/// Custom language models prepared by a real daemon and applied to dictation (000 §11.5–11.6):
/// the seeds' chess data makes DictationTranscriber read spoken chess commands; prepared models
/// are reused, kept per app under a quota, refused when hostile, and a model never prepared fails
/// the session loudly (on Apple it is silently ignored).
@Suite(.serialized, .enabled(if: Porting.modelsPresent && EmbeddedModels.runs(Flite.available), "needs the embedded catalog and flite (run Scripts/setup.sh)"),
       .portingDaemon)
struct PreparedLanguageModelTests {
    static let english = Locale(identifier: "en_US")
    /// Commands the template covers, and two named lines, as the data writes them (flite says
    /// their words: "knight to queen bishop three"); dictation gives them back as written.
    static let commands = [
        "knight to queen bishop 3", "pawn to king rook 4", "bishop to queen knight 5", "rook to king pawn 1",
        "queen to king bishop 7", "king to queen rook 2", "pawn to queen pawn 6", "knight to king knight 8",
        "Play the Albin counter gambit", "Play the Tartakower",
    ]

    /// What flite is given for a command: its words, numbers spelled out.
    static func spoken(_ command: String) -> String {
        command.split(separator: " ").map { Int($0).map { ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"][$0] } ?? String($0) }
            .joined(separator: " ")
    }

    /// The seeds' data exported into `directory`.
    static func exported(in directory: TempDirectory, version: String? = nil) async throws -> URL {
        let url = URL(fileURLWithPath: directory.file("CustomLMData (en_US)\(version ?? "").bin"))
        if let version {
            let data = SFCustomLanguageModelData(locale: english, identifier: "com.example.chess", version: version) {
                SFCustomLanguageModelData.PhraseCount(phrase: "Play the Albin counter gambit", count: 10)
            }
            try await data.export(to: url)
        } else {
            try await datagenerator(outputURL: url)
        }
        return url
    }

    @Test func theSeedsChessModelMakesDictationReadChessCommands() async throws {
        try await Porting.useDaemon()
        let directory = try TempDirectory("eslm")
        defer { directory.remove() }
        let lmConfiguration = try await prepareCustomLanguageModel(exportedAt: try await Self.exported(in: directory),
                                                                   handle: URL(fileURLWithPath: directory.file("chess.handle")))
        var urls: [URL] = []
        var references: [String] = []
        for voice in Flite.voices {
            for (index, command) in Self.commands.enumerated() {
                urls.append(URL(fileURLWithPath: try await Flite.wav(Self.spoken(command), voice: voice, name: "\(voice)-\(index).wav", in: directory)))
                references.append(command)
            }
        }
        // One command a session, as an app that takes spoken moves would run them.
        var plain = "", biased = "", unhonored: [UnhonoredRequest] = []
        for url in urls {
            plain += try await dictate([url], with: dictationTranscriber(locale: Self.english, preset: .longDictation, lmConfiguration: nil), contexts: [nil])
            let transcriber = dictationTranscriber(locale: Self.english, preset: .longDictation, lmConfiguration: lmConfiguration)
            biased += try await dictate([url], with: transcriber, contexts: [nil])
            unhonored += transcriber.unhonoredRequests
        }
        let reference = references.joined(separator: " ")
        let before = WordErrorRate.rate([(reference, plain)]), after = WordErrorRate.rate([(reference, biased)])
        print(String(format: "[custom language model] %d words: WER %.1f %% without, %.1f %% with\n  without: %@\n  with:    %@",
                     WordErrorRate.words(reference).count, before * 100, after * 100, plain, biased))
        #expect(before > 0.4)
        #expect(after < 0.15)
        #expect(!unhonored.contains { $0.kind == .contextualString }, "every model word is pronounced: \(unhonored)")
    }

    @Test func preparedModelsAreReusedKeptPerAppBoundedAndPrivate() async throws {
        let daemon = try #require(Porting.daemon)
        let directory = try TempDirectory("eslm")
        defer { directory.remove() }
        let connection = try await DaemonConnection.connect(socket: daemon.socket, appID: "com.example.lm-quota")
        func prepare(_ url: URL, ignoresCache: Bool = false) async throws -> PrepareLanguageModelReply {
            try await connection.request(PrepareLanguageModelRequest(ignoresCache: ignoresCache), payload: Array(try Data(contentsOf: url)),
                                         expecting: PrepareLanguageModelReply.self)
        }
        let chess = try await Self.exported(in: directory)
        let first = try await prepare(chess), again = try await prepare(chess), rebuilt = try await prepare(chess, ignoresCache: true)
        #expect(!first.reused && again.reused && !rebuilt.reused)
        #expect(first.prepared.model == again.prepared.model && again.prepared.model == rebuilt.prepared.model)
        #expect(first.prepared.phrases == 3 + 576 && first.prepared.identifier == "com.example.chess" && first.prepared.locale == "en-US")

        // Hostile or broken data: a typed refusal, nothing stored.
        for bytes in [Array("{\"format\":".utf8), Array("not json".utf8), [UInt8](repeating: 0xff, count: 64)] {
            await #expect(throws: EarshotError.self) {
                _ = try await connection.request(PrepareLanguageModelRequest(), payload: bytes, expecting: PrepareLanguageModelReply.self)
            }
        }
        let listed = try await connection.request(LanguageModelsRequest(), expecting: LanguageModelsReply.self)
        #expect(listed.models.filter { $0.appId == "com.example.lm-quota" }.count == 1 && listed.maximum == 8)

        // Eight per app; the ninth is refused, another app has its own eight.
        for version in 2...8 { _ = try await prepare(try await Self.exported(in: directory, version: "\(version)")) }
        do {
            _ = try await prepare(try await Self.exported(in: directory, version: "9"))
            Issue.record("a ninth prepared model was accepted")
        } catch let EarshotError.daemon(error) {
            #expect(error.code == .quotaExceeded, "\(error)")
        }
        let other = try await DaemonConnection.connect(socket: daemon.socket, appID: "com.example.other")
        _ = try await other.request(PrepareLanguageModelRequest(), payload: Array(try Data(contentsOf: chess)), expecting: PrepareLanguageModelReply.self)
        await other.close()
        await connection.close()

        // Kept under the state directory, private to the daemon.
        let folder = daemon.directory.file("state/language-models/\(getuid())")
        let attributes = try FileManager.default.attributesOfItem(atPath: folder)
        #expect((attributes[.posixPermissions] as? Int) == 0o700)
        let files = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".json") }
        let mine = try await DaemonConnection.connect(socket: daemon.socket, appID: "com.example.lm-quota")
        let all = try await mine.request(LanguageModelsRequest(), expecting: LanguageModelsReply.self).models
        await mine.close()
        #expect(all.filter { $0.appId == "com.example.lm-quota" }.count == 8 && all.filter { $0.appId == "com.example.other" }.count == 1)
        #expect(files.count == all.count)
        #expect(try files.allSatisfy { (try FileManager.default.attributesOfItem(atPath: folder + "/" + $0)[.posixPermissions] as? Int) == 0o600 })
    }

    /// Beyond Apple: a SpeechTranscriber (Whisper) takes a custom language model's phrases and
    /// words as contextual strings. "Winawer", spoken as in Polish ("vee-nah-ver"), is written as
    /// the data spells it only with the model.
    @Test func whisperTakesTheModelsPhrasesAsContext() async throws {
        try await Porting.useDaemon()
        let directory = try TempDirectory("eslm")
        defer { directory.remove() }
        let lmConfiguration = try await prepareCustomLanguageModel(exportedAt: try await Self.exported(in: directory),
                                                                   handle: URL(fileURLWithPath: directory.file("chess.handle")))
        let line = URL(fileURLWithPath: try await Flite.wav("play the vee nah ver variation", voice: "slt", name: "w.wav", in: directory))
        func transcribe(_ transcriber: SpeechTranscriber) async throws -> String {
            try await ensureAssets(for: transcriber)
            let analyzer = SpeechAnalyzer(modules: [transcriber])
            async let text = transcriber.results.reduce(into: "") { $0 += String($1.text.characters) }
            let last = try await analyzer.analyzeSequence(from: try AVAudioFile(forReading: line))
            try await analyzer.finalizeAndFinish(through: try #require(last))
            return try await text
        }
        let plain = try await transcribe(SpeechTranscriber(locale: Self.english, preset: .transcription))
        let transcriber = SpeechTranscriber(locale: Self.english, preset: .transcription, customLanguageModel: lmConfiguration)
        let biased = try await transcribe(transcriber)
        print("[whisper] without the model: \(plain)\n[whisper] with it: \(biased)")
        #expect(!WordErrorRate.words(plain).contains("winawer"), "the baseline must miss the name for the test to mean anything: \(plain)")
        #expect(WordErrorRate.words(biased).contains("winawer"), "\(biased)")
        // The chess data's phrases and words fit Whisper's bounds (32 phrases, 600 characters): none
        // is reported (past them they would be, as any contextual string is).
        #expect(!transcriber.unhonoredRequests.contains { $0.kind == .contextualString }, "\(transcriber.unhonoredRequests)")
    }

    /// Two more of Apple's silent failures, refused here: a model for another language than the
    /// transcriber's, and a weight outside (0, 1).
    @Test func aModelForAnotherLanguageOrWithABadWeightIsRefused() async throws {
        try await Porting.useDaemon()
        let directory = try TempDirectory("eslm")
        defer { directory.remove() }
        let command = URL(fileURLWithPath: try await Flite.wav(Self.spoken(Self.commands[0]), voice: Flite.voices[0], name: "c.wav", in: directory))
        let german = SFCustomLanguageModelData(locale: Locale(identifier: "de_DE"), identifier: "com.example.schach", version: "1") {
            SFCustomLanguageModelData.PhraseCount(phrase: "Springer nach Dame Läufer drei", count: 10)
        }
        let exported = URL(fileURLWithPath: directory.file("CustomLMData (de_DE).bin"))
        try await german.export(to: exported)
        let schach = try await prepareCustomLanguageModel(exportedAt: exported, handle: URL(fileURLWithPath: directory.file("schach.handle")))
        let chess = try await prepareCustomLanguageModel(exportedAt: try await Self.exported(in: directory), handle: URL(fileURLWithPath: directory.file("chess.handle")))
        let heavy = SFSpeechLanguageModel.Configuration(languageModel: chess.languageModel, weight: 1.5)
        for (configuration, expected) in [(schach, "is for de-DE"), (heavy, "weight must be between 0 and 1")] {
            do {
                _ = try await dictate([command], with: dictationTranscriber(locale: Self.english, preset: .longDictation, lmConfiguration: configuration), contexts: [nil])
                Issue.record("a session opened with \(configuration)")
            } catch let EarshotError.daemon(error) {
                #expect(error.code == .badRequest && error.message.contains(expected), "\(error)")
            }
        }
        // Whisper takes the phrases as contextual strings: a weight it cannot honour is refused.
        let whisper = SpeechTranscriber(locale: Self.english, preset: .transcription, customLanguageModel: heavy)
        try await ensureAssets(for: whisper)
        let analyzer = SpeechAnalyzer(modules: [whisper])
        do {
            _ = try await analyzer.analyzeSequence(from: try AVAudioFile(forReading: command))
            Issue.record("a transcriber took a custom language model's weight")
        } catch let EarshotError.daemon(error) {
            #expect(error.code == .badRequest && error.message.contains("no weight"), "\(error)")
        }
    }

    @Test func aModelNeverPreparedFailsTheSessionInsteadOfBeingIgnored() async throws {
        try await Porting.useDaemon()
        let directory = try TempDirectory("eslm")
        defer { directory.remove() }
        let command = URL(fileURLWithPath: try await Flite.wav(Self.spoken(Self.commands[0]), voice: Flite.voices[0], name: "c.wav", in: directory))
        // Apple's silent failure: the hint built from a configuration whose model was never prepared.
        let unprepared = SFSpeechLanguageModel.Configuration(languageModel: URL(fileURLWithPath: directory.file("never.handle")))
        do {
            _ = try await dictate([command], with: dictationTranscriber(locale: Self.english, preset: .longDictation, lmConfiguration: unprepared), contexts: [nil])
            Issue.record("a session opened with a custom language model that was never prepared")
        } catch let EarshotError.invalidLanguageModelData(message) {
            #expect(message.contains("prepareCustomLanguageModel"), "\(message)")
        }
        // A handle naming a model the daemon does not have (another user's, or removed).
        let handle = directory.file("foreign.handle")
        _ = try directory.write("foreign.handle", #"{"format":"earshot-prepared-language-model","formatVersion":1,"model":"\#(String(repeating: "ab", count: 32))","identifier":"x","version":"1","locale":"en-US"}"#)
        do {
            _ = try await dictate([command], with: dictationTranscriber(locale: Self.english, preset: .longDictation,
                                                                       lmConfiguration: .init(languageModel: URL(fileURLWithPath: handle))), contexts: [nil])
            Issue.record("a session opened with a custom language model the daemon does not have")
        } catch let EarshotError.daemon(error) {
            #expect(error.code == .notFound, "\(error)")
        }
        // The daemon's journal says so too (§11.7: the failure reaches the journal, not only the app).
        let log = try #require(Porting.daemon).child.stderr
        #expect(log.contains("refused earshot.analyzer.open: prepared custom language model \(String(repeating: "ab", count: 32))"), "\(log.suffix(2000))")
    }
}
