import EarshotWire
import Foundation
import Testing
import TestSupport

/// Issue 9, defect 4: with the state disk full, `earshot transcribe` failed with "database or disk
/// is full" because opening a session wrote SQLite. The state dir is a real tmpfs holding the
/// embedded catalog's dictation assets, filled up once they are installed: the installed model
/// still transcribes, and the use it could not record is written once there is space again.
@Suite(.serialized) struct FullDiskServingTests {
    @Test(.enabled(if: EmbeddedModels.runs(SpeechFixtures.catalogAvailable), "needs Scripts/setup.sh"))
    func fullStateDiskStillTranscribesWithAnInstalledModel() async throws {
        let directory = try TempDirectory("fulldisk")
        defer { directory.remove() }
        // PocketSphinx en-US and Silero VAD take about 40 MB installed.
        guard let tmpfs = try SmallTmpfs(at: directory.file("state"), size: "48m") else { return }
        defer { tmpfs.unmount() }
        let daemon = try await TestDaemon(arguments: ["--state-dir", tmpfs.path + "/state"])
        defer { Task { await daemon.cleanUp() } }
        let install = try await earshot(["install", "--locale", "en-US", "--module", "dictation"], daemon)
        try #require(install.status == 0, "\(install.stderr)")

        let filler = try tmpfs.fill()
        let reserve = try await earshot(["reserve", "de-DE"], daemon)
        #expect(reserve.status == 1, "writes still fail: \(reserve.stdout)\(reserve.stderr)")
        let run = try await earshot(["transcribe", "--module", "dictation", "--locale", "en-US", SpeechFixtures.path(SpeechFixtures.ids[1])], daemon)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(!run.stdout.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "no transcript")
        #expect(!run.stderr.contains("disk is full") && !run.stderr.contains("insufficientStorage"), "\(run.stderr)")
        #expect(daemon.child.stderr.contains("recording asset and reservation use failed"), "the deferred write is logged")

        unlink(filler)
        let gc = try await ChildProcess.run(BuiltProducts.path("earshotctl"), ["--socket", daemon.socket, "gc"], in: daemon.directory)
        #expect(gc.status == 2, "space again: GC writes the deferred use and runs: \(gc.stdout)\(gc.stderr)")
        #expect(daemon.child.stderr.contains("recorded the asset and reservation use deferred by a failed write"))
    }

    private func earshot(_ arguments: [String], _ daemon: TestDaemon) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await ChildProcess.run(BuiltProducts.path("earshot"), ["--socket", daemon.socket] + arguments, in: daemon.directory, timeout: .seconds(120))
    }
}
