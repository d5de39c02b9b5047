import EarshotSystem
import EarshotWire
import Foundation
import Testing
import TestSupport

/// Seeded hostile traffic against a real daemon with a speech model installed (so Wyoming
/// transcriptions and analyzer sessions really run): the daemon never crashes, keeps answering a
/// well-behaved client, and its resident memory stays bounded. Bounded in time; `Benchmarks/fuzz.sh`
/// runs 10⁶ frames.
@Suite(.serialized) struct ProtocolFuzzTests {
    /// Resident memory the daemon may reach under the fuzz (PocketSphinx and the VAD for at most
    /// four sessions, plus buffers of in-flight frames): measured 245 and 246 MiB for the two seeds
    /// over 12 s (before issue 8's fixes: 890 and 1192 MiB within 8 s, and no answer to ping).
    static let residentCeiling = 400 << 20

    @Test(arguments: [UInt64(1), 2])
    func hostileTrafficNeitherCrashesNorBloatsTheDaemon(seed: UInt64) async throws {
        // The fuzzer runs as root (an admin, who may ignore resource limits): cap those sessions too,
        // so the memory ceiling bounds four PocketSphinx sessions whatever the seed opens.
        let daemon = try await SpeechDaemon.start(config: "[Limits]\nOutputStallTimeoutSec=2\n[Analysis]\nMaxConcurrentAnalyses=4\nMaxConcurrentAnalysesHard=4\nMaxQueued=0\n", modules: ["dictation"])
        defer { Task { await daemon.cleanUp() } }
        let pid = daemon.child.pid
        let socket = daemon.socket
        let deadline = ContinuousClock.now + .seconds(EmbeddedModels.isCI ? 12 : 8)
        var total = ProtocolFuzzer.Report()
        var peak = 0
        var round = 0
        while ContinuousClock.now < deadline {
            round += 1
            let roundSeed = seed &* 1_000_003 &+ UInt64(round)
            let report = try await BlockingWork.run("earshot.fuzz") {
                var fuzzer = ProtocolFuzzer(seed: roundSeed)
                return try fuzzer.run(socket: socket, frames: 400, deadline: deadline)
            }
            total.add(report)
            let log = String(daemon.child.stderr.suffix(2000))
            try #require(daemon.child.process.isRunning, "the daemon died after \(total.frames) frames (seed \(seed), round \(round)): \(log)")
            peak = max(peak, ProtocolFuzzer.residentBytes(pid: pid) ?? 0)
        }
        print("[fuzz seed \(seed)] \(total); daemon resident peak \(peak >> 20) MiB")
        #expect(total.frames >= 1000)
        #expect(peak < Self.residentCeiling, "resident memory peaked at \(peak >> 20) MiB")
        // Still serving: a well-behaved client gets its answers.
        let client = try TestConnection(daemon.socket)
        defer { client.close() }
        let pong = try #require(try await client.roundTrip(Ping(text: "alive")))
        #expect(pong.type == Pong.eventType)
        let stats = try await client.stats()
        #expect(stats.sessions <= 16)
        await daemon.cleanUp()
    }
}
