import Foundation
import Testing
import TestSupport

/// A user who clones the repository has no team reference shelf (`shared/`) beside it: nothing the product needs at
/// setup, build, test or run time may come from there.
@Suite(.serialized)
struct FreshCloneTests {
    static let root = SpeechFixtures.projectRoot

    /// Files of the repository as a clone has them (tracked and new, not ignored).
    static func repositoryFiles() async throws -> [String] {
        let directory = try TempDirectory("esgit")
        defer { directory.remove() }
        let run = try await ChildProcess.run("/usr/bin/git", ["-C", root, "ls-files", "--cached", "--others", "--exclude-standard"], in: directory)
        try #require(run.status == 0, "git ls-files: \(run.stderr)")
        return run.stdout.split(separator: "\n").map(String.init).filter { FileManager.default.fileExists(atPath: root + "/" + $0) }
    }

    @Test func noSetupBuildTestOrRunFileReadsTheSharedShelf() async throws {
        let code = try await Self.repositoryFiles().filter { path in
            !path.hasPrefix("Docs/") && !path.hasSuffix(".md")
        }
        #expect(code.count > 100)
        for path in code {
            guard let text = try? String(contentsOfFile: Self.root + "/" + path, encoding: .utf8) else { continue }
            // Spelled in pieces so this file does not match itself.
            let shelf = "shared"
            for needle in ["../" + shelf, shelf + "/fixtures", shelf + "/tools", "/work/" + shelf] {
                #expect(!text.contains(needle), "\(path) mentions \(needle)")
            }
        }
    }

    /// Copies the repository to `clone/main` in a fresh directory (no `shared` beside it), runs
    /// `Scripts/setup.sh --no-build` there with its own prefix, and transcribes through a daemon on
    /// the catalog it built.
    @Test func setupOnACloneWithoutSharedBuildsTheFourAssetsAndTranscribes() async throws {
        let directory = try TempDirectory("esclone")
        defer { directory.remove() }
        let clone = directory.file("clone/main")
        try FileManager.default.createDirectory(atPath: clone, withIntermediateDirectories: true)
        let list = try directory.write("files.txt", try await Self.repositoryFiles().joined(separator: "\n") + "\n")
        let copy = try await ChildProcess.run("/bin/sh", ["-c", "tar -C \"$1\" -cf - -T \"$2\" | tar -C \"$3\" -xf -", "copy", Self.root, list, clone], in: directory)
        try #require(copy.status == 0, "copying the repository: \(copy.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.file("clone/shared")))

        let prefix = directory.file("share")
        let setup = try await ChildProcess.run(clone + "/Scripts/setup.sh", ["--no-build"], environment: ["EARSHOT_PREFIX": prefix],
                                               in: directory, timeout: .seconds(900))
        try #require(setup.status == 0, "setup on the clone failed:\n\(setup.stdout)\n\(setup.stderr)")
        let catalog = try JSONSerialization.jsonObject(with: try Data(contentsOf: URL(fileURLWithPath: prefix + "/catalog/catalog.json"))) as? [String: Any]
        let assets = try #require(catalog?["assets"] as? [[String: Any]])
        #expect(Set(assets.compactMap { $0["id"] as? String }) == ["whisper-base", "whisper-tiny-en", "silero-vad", "pocketsphinx-en-us"])
        let base = try #require(assets.first { $0["id"] as? String == "whisper-base" })
        #expect((base["locales"] as? [String])?.count == 100, "99 languages and und")

        let daemon = try await TestDaemon(arguments: ["--catalog", "file://\(prefix)/catalog/catalog.json", "--keys-dir", prefix + "/keys"])
        defer { Task { await daemon.cleanUp() } }
        let run = try await ChildProcess.run(BuiltProducts.path("earshot"), ["--socket", daemon.socket, "transcribe", "--json", SpeechFixtures.path(SpeechFixtures.ids[0])],
                                             in: daemon.directory, timeout: .seconds(300))
        try #require(run.status == 0, "earshot transcribe on the clone's catalog: \(run.stderr)")
        let words = SpeechFixtures.words(run.stdout)
        #expect(SpeechFixtures.inOrder(["john", "consider", "power"], in: words).ok, "\(run.stdout)")
        let monitor = try TestConnection(daemon.socket)
        defer { monitor.close() }
        let installed = try await monitor.assets().assets.map(\.id).sorted()
        #expect(installed == ["silero-vad", "whisper-base"], "the default transcriber is Whisper base: \(installed)")
        await daemon.cleanUp()
    }
}
