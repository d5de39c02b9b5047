import Earshot
import EarshotWire
import Foundation
import Testing
import TestSupport

/// Issue 8 #9 — "The client ignores the payload limit": a 1 Hz WAV made `earshot transcribe` send a
/// 25.8 MB frame and the user saw "send: Broken pipe". Against a daemon that announces a 16 KiB
/// payload limit (so ordinary input crosses it): the CLI and the library split audio into frames
/// within `limits.frame.max_payload_bytes`, and formats outside the range fail with a clear message.
@Suite(.serialized, .speechDaemon(config: "[Limits]\nMaxPayloadBytes=16384\n", modules: ["dictation"]))
struct ClientPayloadLimitTests {
    /// The suite daemon's `Limits.MaxPayloadBytes`.
    static let limit = 16384

    /// Writes a 16-bit mono WAV with python3's `wave` module: `source`'s samples (every `step`-th)
    /// declared at `rate` Hz, or `frames` of silence.
    static func wav(_ name: String, rate: Int, source: String? = nil, step: Int = 1, frames: Int = 0, in directory: TempDirectory) async throws -> String {
        let script = try directory.write("make-wav.py", """
        import sys, wave
        out, rate, source, step, frames = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
        if source:
            with wave.open(source, "rb") as w:
                pcm = w.readframes(w.getnframes())
            pcm = b"".join(pcm[i:i + 2] for i in range(0, len(pcm), 2 * step))
        else:
            pcm = b"\\0\\0" * frames
        with wave.open(out, "wb") as w:
            w.setnchannels(1); w.setsampwidth(2); w.setframerate(rate)
            w.writeframes(pcm)
        """)
        let out = directory.file(name)
        let made = try await ChildProcess.run("/usr/bin/env", ["python3", script, out, "\(rate)", source ?? "", "\(step)", "\(frames)"], in: directory)
        try #require(made.status == 0, "python3 could not write \(name): \(made.stderr)")
        return out
    }

    static func transcribe(_ path: String, daemon: TestDaemon, in directory: TempDirectory) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await ChildProcess.run(BuiltProducts.path("earshot"), ["--socket", daemon.socket, "transcribe", "--module", "dictation", "--locale", "en-US", path],
                                   in: directory, timeout: .seconds(120))
    }

    @Test func theClientIgnoresThePayloadLimit() async throws {
        let daemon = try SpeechDaemon.shared()
        let directory = try TempDirectory("espl")
        defer { directory.remove() }

        // 806 frames at 1 Hz: the old CLI resampled them into one 25.8 MB frame.
        let oneHertz = try await Self.wav("one-hertz.wav", rate: 1, frames: 806, in: directory)
        let refused = try await Self.transcribe(oneHertz, daemon: daemon, in: directory)
        print("[1 Hz] status \(refused.status): \(refused.stderr)")
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("sample rate 1 Hz") && refused.stderr.contains("8000…384000 Hz"), "unclear: \(refused.stderr)")
        #expect(!refused.stderr.lowercased().contains("broken pipe"))

        // Ordinary files: 2 s per read is 64 KB of 16 kHz s16le, four times the announced limit.
        let utterance = SpeechFixtures.path(SpeechFixtures.ids[1])
        let run = try await Self.transcribe(utterance, daemon: daemon, in: directory)
        print("[16 kHz, 16 KiB frames] status \(run.status): \(run.stdout)")
        #expect(run.status == 0, "\(run.stderr)")
        #expect(SpeechFixtures.words(run.stdout).contains("man"), "\(run.stdout)")

        // The lowest rate accepted (8 kHz, every other sample) goes through too.
        let low = try await Self.wav("eight-k.wav", rate: 8000, source: utterance, step: 2, in: directory)
        let lowRun = try await Self.transcribe(low, daemon: daemon, in: directory)
        print("[8 kHz] status \(lowRun.status): \(lowRun.stdout)")
        #expect(lowRun.status == 0, "\(lowRun.stderr)")

        // --live: an unreadable rate is an error, not a silent 16 kHz.
        let live = try await ChildProcess.run(BuiltProducts.path("earshot"), ["--socket", daemon.socket, "transcribe", "--live", "--module", "dictation", "--rate", "fast"],
                                              in: directory, timeout: .seconds(60))
        #expect(live.status == 64, "a usage error")
        #expect(live.stderr.contains("--rate needs a whole number"), "\(live.stderr)")
        let slow = try await ChildProcess.run(BuiltProducts.path("earshot"), ["--socket", daemon.socket, "transcribe", "--live", "--module", "dictation", "--rate", "1"],
                                              in: directory, timeout: .seconds(60))
        #expect(slow.status == 1)
        #expect(slow.stderr.contains("8000…384000 Hz"), "\(slow.stderr)")
    }

    /// One `AnalyzerInput` holding a whole utterance (96 KB as s16le) is sent as frames under the
    /// limit; the daemon would close the connection (`malformedFrame`) on a larger one.
    @Test func theClientIgnoresThePayloadLimitInTheLibrary() async throws {
        let daemon = try SpeechDaemon.shared()
        await EarshotService.shared.configure(appID: "com.example.payload-limit-tests", socket: daemon.socket)
        let samples = try SpeechFixtures.samples(SpeechFixtures.ids[1])
        #expect(samples.count * 2 > 4 * Self.limit)
        let format = AVAudioFormat(commonFormat: .pcmFormatInt16, sampleRate: 16000, channels: 1, interleaved: true)!
        let dictation = DictationTranscriber(locale: Locale(identifier: "en-US"), contentHints: [], transcriptionOptions: [], reportingOptions: [], attributeOptions: [])
        let analyzer = SpeechAnalyzer(modules: [dictation])
        let input = AsyncStream<AnalyzerInput> { continuation in
            continuation.yield(AnalyzerInput(buffer: AVAudioPCMBuffer(format: format, interleavedSamples: samples)!, bufferStartTime: CMTime(value: 8000, timescale: 16000)))
            continuation.finish()
        }
        async let collected = SpeechClientLibraryTests.collect(dictation.results)
        let last = try await analyzer.analyzeSequence(input)
        #expect(last == CMTime(value: Int64(8000 + samples.count), timescale: 16000))
        if let last { try await analyzer.finalizeAndFinish(through: last) }
        let results = try await collected
        let text = SpeechClientLibraryTests.text(results)
        print("[library, 16 KiB frames] \(text)")
        #expect(SpeechFixtures.words(text).contains("man"), "\(text)")
        // The first frame carried the start time, the others followed on.
        #expect(results.filter(\.isFinal).allSatisfy { $0.range.start >= CMTime(value: 8000, timescale: 16000) && $0.range.end <= last! })
    }

    /// A rate that is not a whole number of Hz is refused before anything is sent.
    @Test func theClientIgnoresThePayloadLimitWithAnUnreadableRate() async throws {
        let daemon = try SpeechDaemon.shared()
        await EarshotService.shared.configure(appID: "com.example.payload-limit-tests", socket: daemon.socket)
        let dictation = DictationTranscriber(locale: Locale(identifier: "en-US"), contentHints: [], transcriptionOptions: [], reportingOptions: [], attributeOptions: [])
        let analyzer = SpeechAnalyzer(modules: [dictation])
        let format = AVAudioFormat(commonFormat: .pcmFormatInt16, sampleRate: 16000.5, channels: 1, interleaved: true)!
        let input = AsyncStream<AnalyzerInput> { continuation in
            continuation.yield(AnalyzerInput(buffer: AVAudioPCMBuffer(format: format, interleavedSamples: [Float](repeating: 0, count: 1600))!))
            continuation.finish()
        }
        do {
            _ = try await analyzer.analyzeSequence(input)
            Issue.record("a 16000.5 Hz buffer was sent")
        } catch let error as EarshotError {
            #expect(error.code == .unsupportedAudioFormat, "\(error)")
            #expect(error.description.contains("16000.5"), "\(error)")
        }
        await analyzer.cancelAndFinishNow()
    }
}
