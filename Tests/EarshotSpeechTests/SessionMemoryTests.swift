import EarshotAudio
@testable import EarshotSpeech
import EarshotWire
import Foundation
import Testing
import TestSupport

/// Issue 8, defect 6 — "Memory grows with stream length": a session keeps only what its voice
/// activity detector has not yet passed, so the audio it holds stays under
/// ``AnalysisSession/maxRetainedSamples`` however long the stream runs (real Silero VAD, fake
/// transcriber: the VAD is the only real work, so an hour takes seconds).
@Suite(.serialized) struct SessionMemoryTests {
    static let minute = 60 * 16000

    func session(_ modules: [ModuleConfiguration], parallelism: Int = 1, log: EventLog) throws -> AnalysisSession {
        try #require(FileManager.default.fileExists(atPath: SessionTests.vadModel), "run Scripts/setup.sh: it installs the Silero VAD model")
        var configuration = SileroDetector.Configuration.transcription
        configuration.modelPath = SessionTests.vadModel
        let vad = try SileroDetector(configuration: configuration)
        let transcriber = CountingTranscriber()
        let runs = modules.enumerated().map { index, config in
            SessionModule(index: index, configuration: config, engine: config.kind == .detector ? .detector : .segments(transcriber))
        }
        return AnalysisSession(id: "m", modules: runs, vad: vad, decodeParallelism: parallelism) { log.append($0) }
    }

    /// Feeds `audio` (one period) `repeats` times in 10 s chunks; returns the most the session held.
    func feed(_ session: AnalysisSession, period audio: [Float], repeats: Int, gap: WireTime? = nil) async -> AnalysisSession.RetainedAudio {
        let pcm = PCMSamples.s16le(audio)
        let chunk = 10 * 16000 * 2
        var peak = AnalysisSession.RetainedAudio(open: 0, preroll: 0, detector: 0, decoding: 0, runs: 0)
        var next = WireTime.zero
        for _ in 0..<repeats {
            for start in stride(from: 0, to: pcm.count, by: chunk) {
                let piece = Array(pcm[start..<min(start + chunk, pcm.count)])
                await session.accept(piece, format: .speech16k, start: gap == nil ? nil : next)
                next = next + WireTime(value: Int64(piece.count / 2), timescale: 16000) + (gap ?? .zero)
            }
            let now = await session.retainedAudio()
            peak = .init(open: max(peak.open, now.open), preroll: max(peak.preroll, now.preroll),
                         detector: max(peak.detector, now.detector), decoding: max(peak.decoding, now.decoding), runs: max(peak.runs, now.runs),
                         speculative: max(peak.speculative, now.speculative))
        }
        return peak
    }

    @Test func memoryGrowsWithStreamLength() async throws {
        // An hour of silence, sampled every minute.
        let log = EventLog()
        let session = try session([SessionTests.transcriber], log: log)
        let began = ContinuousClock.now
        let peak = await feed(session, period: SessionTests.silence(60), repeats: 60)
        let last = await session.finish(.finalizeThroughEndOfInput, time: nil)
        print("[memory] 1 h of silence in \(ContinuousClock.now - began): peak held \(peak) (cap \(AnalysisSession.maxRetainedSamples))")
        #expect(last == WireTime(value: Int64(60 * Self.minute), timescale: 16000))
        #expect(peak.samples <= AnalysisSession.maxRetainedSamples, "held \(peak.samples) samples after an hour of silence")
        #expect(peak.open <= AnalysisSession.maxOpenSamples)
        #expect(peak.runs == 1)
        #expect(log.finished.count == 1)
    }

    /// With 1 and 4 segments decoding at once (what decodes in flight hold counts too).
    @Test(arguments: [1, 4])
    func memoryGrowsWithStreamLengthOfAlternatingSpeechAndSilence(parallelism: Int) async throws {
        // Speech, 20 s of silence, speech, 1 s of silence: 10 minutes, every utterance transcribed.
        let log = EventLog()
        let detector = ModuleConfiguration(kind: .detector, locale: nil, reportingOptions: ["reportResults"], sensitivity: "medium")
        let session = try session([SessionTests.transcriber, detector], parallelism: parallelism, log: log)
        let speech = try SessionTests.speech()
        let period = speech + SessionTests.silence(20) + speech + SessionTests.silence(1)
        let repeats = 10 * Self.minute / period.count
        let peak = await feed(session, period: period, repeats: repeats)
        _ = await session.finish(.finalizeThroughEndOfInput, time: nil)
        print("[memory] \(repeats) × \(period.count / 16000) s of speech and silence: peak held \(peak)")
        #expect(peak.samples <= AnalysisSession.maxRetainedSamples)
        #expect(peak.open <= AnalysisSession.maxOpenSamples)
        #expect(log.finals.filter { $0.module == 0 }.count == 2 * repeats)
    }

    @Test func memoryGrowsWithStreamLengthOfDiscontiguousInput() async throws {
        // 2,000 chunks of 0.1 s, each after a 0.1 s gap: the timeline keeps only the runs it needs.
        let log = EventLog()
        let session = try session([SessionTests.transcriber], log: log)
        let peak = await feed(session, period: SessionTests.silence(0.1), repeats: 2000, gap: WireTime(value: 1, timescale: 10))
        let last = await session.finish(.finalizeThroughEndOfInput, time: nil)
        print("[memory] 2000 discontiguous chunks: peak held \(peak)")
        #expect(last == WireTime(value: 2000 * 2 - 1, timescale: 10))
        #expect(peak.runs <= AnalysisSession.maxRetainedRuns)
        #expect(peak.samples <= AnalysisSession.maxRetainedSamples)
    }
}
