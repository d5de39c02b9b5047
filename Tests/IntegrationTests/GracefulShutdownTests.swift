import EarshotWire
import Foundation
import Testing
import TestSupport

/// Issue 8, part 1 — graceful shutdown: on SIGTERM a session is finished through the end of its
/// input (its final results reach the client before the connection closes); only a session still
/// running at `ShutdownTimeoutSec` is cancelled, and the daemon still exits 0.
@Suite(.serialized) struct GracefulShutdownTests {
    /// "he was not an ill disposed young man" (3 s).
    static let clip = SpeechFixtures.ids[1]

    /// The audio stops right after "man" and the client never finishes: only the shutdown's
    /// finalization can produce the last words.
    @Test func sigtermFinishesAClientsSessionBeforeClosingItsConnection() async throws {
        let daemon = try await SpeechDaemon.start(modules: ["dictation"])
        defer { Task { await daemon.cleanUp() } }
        let samples = try SpeechFixtures.samples(Self.clip)
        let cut = min(samples.count, SpeechFixtures.endOfSpeech(samples) + SpeechFixtures.rate / 50)
        let client = try TestConnection(daemon.socket)
        defer { client.close() }
        var session = try await WireSession.opened(client, [SpeechFixtures.dictation()])
        try await session.send(samples[..<cut])
        // A reply means the daemon has taken every frame sent before it (frames are served in order).
        _ = try await client.reply(to: StatusRequest())

        daemon.child.signal(SIGTERM)
        let finished = try await session.waitFinished(timeout: .seconds(30))
        #expect(finished.error == nil)
        let words = SpeechFixtures.words(session.finalText())
        #expect(words.last == "man", "the end of the input was not finalized: '\(session.finalText())'")
        #expect(SpeechFixtures.inOrder(["was", "young", "man"], in: words).ok)
        #expect(try await client.next() == nil, "the connection closes once the session's results are out")
        #expect(await daemon.child.wait() == 0)
        #expect(daemon.child.stderr.contains("earshotd stopped"))
        #expect(!daemon.child.stderr.contains("shutdown deadline passed"))
    }

    /// The Wyoming client is mid-stream (no `audio-stop`): at SIGTERM it still gets the
    /// `transcript` of what it sent, then `transcript-stop`, then the close.
    @Test func sigtermSendsAWyomingClientItsTranscriptBeforeClosing() async throws {
        let daemon = try await SpeechDaemon.start(modules: ["dictation"])
        defer { Task { await daemon.cleanUp() } }
        let samples = try SpeechFixtures.samples(Self.clip)
        let cut = min(samples.count, SpeechFixtures.endOfSpeech(samples) + SpeechFixtures.rate / 50)
        let pcm = PCMSamples.s16le(Array(samples[..<cut]))
        let format = AudioFormatFields(rate: 16000, width: 2, channels: 1)
        let client = try TestConnection(daemon.socket)
        defer { client.close() }
        try await client.send(Transcribe(name: "pocketsphinx-en-us"))
        try await client.send(AudioStart(format: format))
        for start in stride(from: 0, to: pcm.count, by: 3200) {
            try await client.send(AudioChunk(format: format), payload: Array(pcm[start..<min(start + 3200, pcm.count)]))
        }
        _ = try await client.untilPong(timeout: .seconds(30))

        daemon.child.signal(SIGTERM)
        var frames: [Frame] = []
        while let frame = try await client.next(timeout: .seconds(30)) { frames.append(frame) }
        #expect(frames.map(\.type).suffix(2) == [Transcript.eventType, TranscriptStop.eventType], "\(frames.map(\.type))")
        let transcript = try #require(try frames.first { $0.type == Transcript.eventType }?.decode(Transcript.self))
        #expect(SpeechFixtures.words(transcript.text).last == "man", "\(transcript.text)")
        #expect(await daemon.child.wait() == 0)
    }

    /// 20 s of audio queued behind a zero deadline: the session cannot be finalized in time, so it
    /// is cancelled (no `finished` reaches the client), its connection closed, and the exit is clean.
    /// Regression: with concurrent decoding the daemon aborted at exit ("Ort::Exception:
    /// GetElementType is not implemented") — a cancelled session's detector still ran ONNX Runtime
    /// while exit(3) destroyed its statics; earshotd now leaves with _exit after flushing.
    @Test func aSessionStillRunningAtTheDeadlineIsCancelledAndTheDaemonExitsZero() async throws {
        let daemon = try await SpeechDaemon.start(config: "[Daemon]\nShutdownTimeoutSec=0", modules: ["dictation"])
        defer { Task { await daemon.cleanUp() } }
        let samples = try SpeechFixtures.samples(Self.clip)
        let client = try TestConnection(daemon.socket)
        defer { client.close() }
        let session = try await WireSession.opened(client, [SpeechFixtures.dictation()])
        for _ in 0..<6 { try await session.send(samples) }
        _ = try await client.reply(to: StatusRequest())

        daemon.child.signal(SIGTERM)
        var types: [String] = []
        while let frame = try await client.next(timeout: .seconds(30)) { types.append(frame.type) }
        #expect(!types.contains(AnalyzerFinished.eventType), "the session was finalized, not cancelled: \(types)")
        let status = await daemon.child.wait()
        #expect(status == 0, "exit \(status.map(String.init) ?? "none"): \(daemon.child.stderr.suffix(3000))")
        #expect(daemon.child.stderr.contains("shutdown deadline passed, forcing what is still running:"))
        #expect(daemon.child.stderr.contains("session coordinator"), "the coordinator cancelled the session")
        #expect(daemon.child.stderr.contains("earshotd stopped"))
    }
}
