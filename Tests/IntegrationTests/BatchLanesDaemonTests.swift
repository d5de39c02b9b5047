import EarshotWire
import Foundation
import Testing
import TestSupport

/// Issue 10, item 2, through the daemon with `BatchThreads=1` (the default from session 7 to issue 29; set
/// here so the suite tests the copy whatever the default).
@Suite(.serialized, .speechDaemon(config: "[Analysis]\nBatchThreads=1\n", modules: ["transcriber"]), .enabled(if: SpeechFixtures.whisperAvailable, SpeechFixtures.whisperMissing))
struct BatchLanesDaemonTests {
    /// Issue 10, item 2: a recording sent at once decodes its segments side by side, one per core;
    /// once they overlap they move to a 1-thread copy of the model (on 2 cores ~1.3x faster than
    /// two decodes sharing one 2-thread pool), and the transcript is still whole and in order.
    @Test func overlappingDecodesOfALongRecordingMoveToAOneThreadCopyOfTheModel() async throws {
        let daemon = try SpeechDaemon.shared()
        let directory = try TempDirectory("esbatch")
        defer { directory.remove() }
        let (path, reference) = try SpeechFixtures.longRecording(in: directory, repeats: 1)
        let samples = try SpeechFixtures.samples(path: path)
        let client = try TestConnection(daemon.socket)
        let monitor = try TestConnection(daemon.socket)
        defer { client.close(); monitor.close() }
        _ = try await monitor.reply(to: EndRetentionRequest())
        let before = try await monitor.pollStats { $0.models.isEmpty }
        var session = try await WireSession.opened(client, [SpeechFixtures.transcriber()], options: AnalysisOptions(modelRetention: .lingering))
        try await session.send(samples[...])
        _ = try await session.finish()
        #expect(session.finished?.error == nil)
        let after = try await monitor.stats()
        let keys = after.models.map(\.key)
        if ProcessInfo.processInfo.activeProcessorCount > 1 {
            #expect(keys.contains { $0.hasSuffix("/threads=2") } && keys.contains { $0.hasSuffix("/threads=1") }, "\(keys)")
            #expect(after.modelLoads == before.modelLoads + 2, "the session's model and its 1-thread copy")
        }
        let hypothesis = session.finalText(module: 0)
        let order = SpeechFixtures.inOrder(SpeechAccuracyTests.keyWords.flatMap { $0 }, in: SpeechFixtures.words(hypothesis))
        #expect(order.ok, "missing '\(order.missing ?? "")' (in order) from: \(hypothesis)")
        #expect(SpeechFixtures.wer([(reference, hypothesis)]) <= SpeechAccuracyTests.longWhisperCeiling[.live]!, "\(hypothesis)")
        _ = try await monitor.reply(to: EndRetentionRequest())
    }
}
