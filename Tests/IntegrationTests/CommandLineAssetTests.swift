import EarshotWire
import Foundation
import Testing
import TestSupport

/// `earshot` and `earshotctl` asset commands on the embedded default catalog: output and exit codes.
@Suite struct CommandLineAssetTests {
    func run(_ tool: String, _ arguments: [String], _ daemon: TestDaemon) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await ChildProcess.run(BuiltProducts.path(tool), ["--socket", daemon.socket] + arguments, in: daemon.directory)
    }

    @Test func installThenNothingToDoThenGCAndUpdate() async throws {
        try #require(FileManager.default.fileExists(atPath: ClientAssetInventoryTests.embeddedCatalog), "run Scripts/setup.sh first")
        let daemon = try await TestDaemon()
        defer { Task { await daemon.cleanUp() } }

        let locales = try await run("earshot", ["locales", "--module", "dictation", "--json"], daemon)
        #expect(try JSONDecoder().decode(LocalesReply.self, from: Data(locales.stdout.utf8)).locales.contains("en-US"))

        let first = try await run("earshot", ["install", "--locale", "en_US", "--module", "dictation"], daemon)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("installed pocketsphinx-en-us@1"))
        #expect(first.stderr.contains("pocketsphinx-en-us@1: installed")) // phase lines when stderr is not a terminal
        let again = try await run("earshot", ["install", "--locale", "en-US", "--module", "dictation"], daemon)
        #expect(again.status == 2)
        #expect(again.stdout.contains("already installed"))

        let assets = try await run("earshotctl", ["assets", "--json"], daemon)
        let listed = try JSONDecoder().decode(AssetsReply.self, from: Data(assets.stdout.utf8))
        let installed = try #require(listed.assets.first { $0.id == "pocketsphinx-en-us" })
        #expect(installed.current && installed.reserved)
        #expect(FileManager.default.fileExists(atPath: installed.path + "/dictionary.dict"))

        let all = try await run("earshotctl", ["reservations", "--all", "--json"], daemon)
        let reservations = try JSONDecoder().decode(ReservationsReply.self, from: Data(all.stdout.utf8)).reservations
        #expect(reservations.contains { $0.appId == "org.earshot.earshot" && $0.locale == "en-US" && $0.uid == getuid() })

        let gc = try await run("earshotctl", ["gc", "--dry-run"], daemon)
        #expect(gc.status == 2) // everything is reserved: nothing to free
        let update = try await run("earshotctl", ["update"], daemon)
        #expect(update.status == 2, "\(update.stdout)\(update.stderr)")
        #expect(update.stdout.contains("nothing to update"))

        let release = try await run("earshotctl", ["release", "--locale", "en-US", "--uid", "\(getuid())", "--app", "org.earshot.earshot"], daemon)
        #expect(release.status == 0)
        let releaseAgain = try await run("earshot", ["release", "en-US"], daemon)
        #expect(releaseAgain.status == 2)
    }

    @Test func unsupportedLocaleIsAClearError() async throws {
        let daemon = try await TestDaemon()
        defer { Task { await daemon.cleanUp() } }
        let result = try await run("earshot", ["install", "--locale", "xx-YY"], daemon)
        #expect(result.status == 1)
        #expect(result.stderr.contains("no catalog asset supports transcriber or dictation for locale xx-YY"))
        let missing = try await run("earshotctl", ["install"], daemon)
        #expect(missing.status == 64, "a usage error")
        #expect(missing.stderr.contains("--locale is required"))
    }

    @Test func addAssetPrintsAValidUnsignedEntryAndMergesIntoACatalog() async throws {
        let dir = try TempDirectory()
        defer { dir.remove() }
        try FileManager.default.createDirectory(atPath: dir.file("model"), withIntermediateDirectories: true)
        try dir.write("model/weights.bin", String(repeating: "w", count: 5000))
        try dir.write("model/tokens.txt", "a\nb\n")
        let tar = try await ChildProcess.run("/bin/tar", ["-C", dir.file("model"), "-czf", dir.file("m.tar.gz"), "."], in: dir)
        #expect(tar.status == 0)
        let catalog = dir.file("catalog.json")
        let args = ["catalog", "add-asset", "file://" + dir.file("m.tar.gz"), "--id", "demo-model", "--kind", "transcriber", "--engine", "sherpa-onnx-whisper",
                    "--locale", "en-US", "--role", "model=weights.bin", "--role", "tokens=tokens.txt", "--license", "MIT"]
        let printed = try await ChildProcess.run(BuiltProducts.path("earshotctl"), args, in: dir)
        #expect(printed.status == 0, "\(printed.stderr)")
        #expect(printed.stdout.contains("\"sha256\""))
        let merged = try await ChildProcess.run(BuiltProducts.path("earshotctl"), args + ["--catalog", catalog], in: dir)
        #expect(merged.status == 0, "\(merged.stderr)")
        #expect(merged.stderr.contains("minisign -Sm \(catalog)"))
        let text = try String(contentsOfFile: catalog, encoding: .utf8)
        #expect(text.contains("\"installed_size\" : 9096"), "the extracted bytes with each member charged at least one 4096-byte block")
        let wrongRole = try await ChildProcess.run(BuiltProducts.path("earshotctl"), args.dropLast(2) + ["--role", "x=missing.bin"], in: dir)
        #expect(wrongRole.status == 1)
        #expect(wrongRole.stderr.contains("has no missing.bin"))
    }
}
