import EarshotWire
import Foundation
import Testing
import TestSupport

/// `earshot lm build|prepare|list`, `earshot transcribe --lm` and `earshotctl language-models`
/// against a real daemon with dictation installed: the DSL's JSON form becomes a file, the daemon
/// prepares it, and dictation reads a spoken chess move with it that it misreads without.
@Suite(.serialized, .speechDaemon(modules: ["dictation"]), .enabled(if: EmbeddedModels.runs(Flite.available), "needs flite (Scripts/setup.sh)"))
struct LanguageModelCommandTests {
    static let chess = """
        {"locale": "en-US", "identifier": "com.example.chess", "version": "1",
         "phrases": [{"phrase": "Play the Albin counter gambit", "count": 10}],
         "templateGroups": [{"classes": {"piece": ["pawn", "rook", "knight", "bishop", "queen", "king"], "royal": ["queen", "king"],
                                         "rank": ["1", "2", "3", "4", "5", "6", "7", "8"]},
                             "templates": [{"body": "<piece> to <royal> <piece> <rank>", "count": 10000}]}]}
        """

    @Test func buildPrepareListAndTranscribeWithACustomLanguageModel() async throws {
        let daemon = try SpeechDaemon.shared()
        let directory = try TempDirectory("eslmcli")
        defer { directory.remove() }
        func run(_ program: String, _ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
            try await ChildProcess.run(BuiltProducts.path(program), ["--socket", daemon.socket] + arguments, in: directory, timeout: .seconds(120))
        }
        let data = try directory.write("chess.json", Self.chess)
        let built = try await run("earshot", ["lm", "build", data, "-o", directory.file("chess.bin")])
        #expect(built.status == 0, "\(built.stderr)")
        let prepared = try await run("earshot", ["lm", "prepare", directory.file("chess.bin")])
        #expect(prepared.status == 0 && FileManager.default.fileExists(atPath: directory.file("chess.handle")), "\(prepared.stderr)")
        let listed = try await run("earshot", ["lm", "list", "--json"])
        let reply = try JSONDecoder().decode(LanguageModelsReply.self, from: Data(listed.stdout.utf8))
        #expect(reply.models.contains { $0.identifier == "com.example.chess" && $0.phrases == 577 && $0.appId == "org.earshot.earshot" }, "\(listed.stdout)")
        let admin = try await run("earshotctl", ["language-models", "--all", "--json"])
        #expect(admin.status == 0 && admin.stdout.contains("com.example.chess"), "\(admin.stderr)")

        let move = try await Flite.wav("knight to queen bishop three", voice: "slt", name: "move.wav", in: directory)
        let plain = try await run("earshot", ["transcribe", "--module", "dictation", move])
        let biased = try await run("earshot", ["transcribe", "--module", "dictation", "--lm", directory.file("chess.handle"), move])
        print("[earshot transcribe] without --lm: \(plain.stdout)with --lm: \(biased.stdout)")
        #expect(WordErrorRate.words(plain.stdout) != WordErrorRate.words("knight to queen bishop three"), "the baseline must misread it for the test to mean anything")
        // Given back as the data wrote it.
        #expect(biased.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "knight to queen bishop 3", "\(biased.stderr)")

        // Another uid holding the handle file cannot use the model: it is looked for among that
        // uid's own prepared models.
        OtherUser.openDirectories(daemon.directory.path, daemon.directory.file("run"), directory.path)
        let stranger = try await OtherUser.run(as: OtherUser.nobody, BuiltProducts.path("earshot"),
                                               ["--socket", daemon.socket, "transcribe", "--module", "dictation", "--lm", directory.file("chess.handle"), move],
                                               environment: ["HOME": directory.path], in: directory, timeout: .seconds(120))
        #expect(stranger.status == 1 && stranger.stderr.contains("prepared custom language model") && stranger.stderr.contains("not found"), "\(stranger.stderr)")

        // Nothing accepted and ignored: a missing handle, bad data.
        let missing = try await run("earshot", ["transcribe", "--lm", directory.file("none.handle"), move])
        #expect(missing.status == 1 && missing.stderr.contains("not a prepared custom language model"), "\(missing.stderr)")
        let bad = try directory.write("bad.json", #"{"locale": "en-US", "identifier": "x", "version": "1", "phrases": [{"phrase": "a", "count": 1}], "extra": 1}"#)
        let refused = try await run("earshot", ["lm", "build", bad, "-o", directory.file("bad.bin")])
        #expect(refused.status == 1 && refused.stderr.contains("unknown key \"extra\""), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.file("bad.bin")))
    }
}
