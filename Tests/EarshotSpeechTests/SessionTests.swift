import EarshotAudio
@testable import EarshotSpeech
import EarshotWire
import Foundation
import Testing
import TestSupport

/// A transcriber that reports what it was given, so tests can check exactly which audio each
/// result covers.
final class CountingTranscriber: SegmentTranscribing {
    let calls = Counter()
    func transcribe(_ samples: [Float], sampleRate: Int, settings: DecodeSettings) throws -> Transcription {
        calls.increment()
        return Transcription(text: "segment of \(samples.count) samples", words: [
            RecognizedWord(text: "segment", start: 0, end: 0.5, confidence: 0.9),
            RecognizedWord(text: "end", start: 0.5, end: Double(samples.count) / Double(sampleRate), confidence: 0.8),
        ])
    }
}

final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func increment() { lock.withLock { value += 1 } }
    var count: Int { lock.withLock { value } }
}

/// Collects what a session emits.
final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [SessionEvent] = []
    func append(_ event: SessionEvent) { lock.withLock { stored.append(event) } }
    var events: [SessionEvent] { lock.withLock { stored } }
    var results: [AnalyzerResult] { events.compactMap { if case .result(let r) = $0 { r } else { nil } } }
    var finals: [AnalyzerResult] { results.filter(\.isFinal) }
    var finished: [WireError?] { events.compactMap { if case .finished(let e) = $0 { .some(e.map { $0 as? WireError ?? WireError(.internalError, "\($0)") }) } else { nil } } }
}

@Suite(.serialized) struct SessionTests {
    static let vadModel = "/usr/local/share/earshot/assets/silero_vad.onnx"
    static let utterance = "/usr/share/pocketsphinx/test/data/librivox/sense_and_sensibility_01_austen_64kb-0880.wav"

    static func speech() throws -> [Float] { try AudioFileReader(path: utterance).readAll() }
    static func pcm(_ samples: [Float]) -> [UInt8] { PCMSamples.s16le(samples) }
    static func silence(_ seconds: Double) -> [Float] { [Float](repeating: 0, count: Int(seconds * 16000)) }

    func session(_ modules: [ModuleConfiguration], transcriber: CountingTranscriber = CountingTranscriber(), log: EventLog) throws -> AnalysisSession {
        try #require(FileManager.default.fileExists(atPath: Self.vadModel), "run Scripts/setup.sh: it installs the Silero VAD model")
        let vad = try SileroDetector(configuration: .init(modelPath: Self.vadModel, sensitivity: .medium))
        let runs = modules.enumerated().map { index, config in
            SessionModule(index: index, configuration: config, engine: config.kind == .detector ? .detector : .segments(transcriber))
        }
        return AnalysisSession(id: "t", modules: runs, vad: vad) { log.append($0) }
    }

    static let transcriber = ModuleConfiguration(kind: .transcriber, locale: "en-US", attributeOptions: ["audioTimeRange", "transcriptionConfidence"])

    @Test func finalResultsCoverTheSpeechOnAnExactTimeline() async throws {
        let log = EventLog()
        let session = try session([Self.transcriber], log: log)
        let audio = Self.silence(1) + (try Self.speech()) + Self.silence(1.5)
        for chunk in stride(from: 0, to: audio.count, by: 3200) {
            await session.accept(Self.pcm(Array(audio[chunk..<min(chunk + 3200, audio.count)])), format: .speech16k, start: nil)
        }
        let last = await session.finish(.finalizeThroughEndOfInput, time: nil)
        #expect(last == WireTime(value: Int64(audio.count), timescale: 16000))
        let finals = log.finals
        #expect(finals.count == 1)
        let result = try #require(finals.first)
        // The speech starts about 1 s in and lasts about 2.7 s.
        #expect(abs(result.range.start.seconds - 1.2) < 0.4)
        #expect(abs(result.range.end.seconds - 4.0) < 0.6)
        #expect(result.range.start.timescale == 16000)
        #expect(result.finalizationTime == result.range.end)
        // Word runs carry times inside the result's range and confidences.
        #expect(result.runs.count == 2)
        #expect(result.runs[0].range?.start == result.range.start)
        #expect(result.runs.allSatisfy { $0.confidence != nil })
        #expect(log.finished.count == 1 && log.finished[0] == nil)
    }

    @Test func stoppingRightAfterTheLastWordKeepsIt() async throws {
        let log = EventLog()
        let session = try session([Self.transcriber], log: log)
        // No trailing silence: the VAD has not seen the speech end when input stops.
        let audio = Self.silence(0.5) + (try Self.speech())
        await session.accept(Self.pcm(audio), format: .speech16k, start: nil)
        let lastTime = WireTime(value: Int64(audio.count), timescale: 16000)
        #expect(await session.finalize(through: nil) == lastTime)
        let result = try #require(log.finals.last)
        // The final result reaches the end of the input: nothing of the last word was dropped.
        #expect(abs(result.range.end.seconds - lastTime.seconds) < 0.1)
        _ = await session.finish(.finalizeThrough, time: lastTime)
        #expect(log.finished.count == 1)
    }

    @Test func anEmptySessionFinishes() async throws {
        let log = EventLog()
        let session = try session([Self.transcriber], log: log)
        #expect(await session.finish(.cancelNow, time: nil) == nil)
        #expect(log.finished.count == 1)
        #expect(log.results.isEmpty)
        // Finishing again changes nothing.
        _ = await session.finish(.finalizeThroughEndOfInput, time: nil)
        #expect(log.finished.count == 1)
    }

    @Test func discontiguousInputKeepsItsTimes() async throws {
        let log = EventLog()
        let session = try session([Self.transcriber], log: log)
        let speech = try Self.speech()
        await session.accept(Self.pcm(speech + Self.silence(0.5)), format: .speech16k, start: WireTime(value: 3, timescale: 1))
        await session.accept(Self.pcm(speech + Self.silence(0.5)), format: .speech16k, start: WireTime(value: 20, timescale: 1))
        _ = await session.finish(.finalizeThroughEndOfInput, time: nil)
        let finals = log.finals
        #expect(finals.count == 2)
        #expect(finals[0].range.start >= WireTime(value: 3, timescale: 1) && finals[0].range.end <= WireTime(value: 7, timescale: 1))
        #expect(finals[1].range.start >= WireTime(value: 20, timescale: 1) && finals[1].range.end <= WireTime(value: 24, timescale: 1))
    }

    @Test func cancelBeforeDropsEarlierAudio() async throws {
        let log = EventLog()
        let transcriber = CountingTranscriber()
        let session = try session([Self.transcriber], transcriber: transcriber, log: log)
        let speech = try Self.speech() + Self.silence(1)
        session.cancelAnalysis(before: WireTime(value: Int64(speech.count), timescale: 16000))
        await session.accept(Self.pcm(speech), format: .speech16k, start: nil)
        await session.accept(Self.pcm(speech), format: .speech16k, start: nil)
        _ = await session.finish(.finalizeThroughEndOfInput, time: nil)
        let finals = log.finals
        #expect(finals.count == 1)
        #expect(finals.allSatisfy { $0.range.start.seconds >= Double(speech.count) / 16000 })
    }

    @Test func audioInAnotherFormatEndsTheSessionWithATypedError() async throws {
        let log = EventLog()
        let session = try session([Self.transcriber], log: log)
        await session.accept([0, 0, 0, 0], format: AudioFormatSpec(rate: 44100, width: 2, channels: 2), start: nil)
        _ = await session.finalize(through: nil)
        #expect(log.finished.count == 1)
        let ended = log.events.compactMap { event -> (any Error)? in if case .finished(let error) = event { error } else { nil } }
        #expect(ended.first.map { if case SpeechError.unsupportedAudio? = $0 as? SpeechError { true } else { false } } == true, "\(ended)")
    }

    @Test func volatileResultsComeBeforeTheFinalOneAndTheRangeClears() async throws {
        let log = EventLog()
        var progressive = Self.transcriber
        progressive.reportingOptions = ["volatileResults"]
        let session = try session([progressive], log: log)
        let audio = Self.silence(0.3) + (try Self.speech()) + (try Self.speech()) + Self.silence(1.5)
        for chunk in stride(from: 0, to: audio.count, by: 1600) {
            await session.accept(Self.pcm(Array(audio[chunk..<min(chunk + 1600, audio.count)])), format: .speech16k, start: nil)
        }
        _ = await session.finish(.finalizeThroughEndOfInput, time: nil)
        let results = log.results
        let firstFinal = try #require(results.firstIndex { $0.isFinal })
        #expect(firstFinal > 0, "volatile results precede the final one")
        #expect(results[..<firstFinal].allSatisfy { !$0.isFinal && $0.range.end <= results[firstFinal].range.end })
        let ranges = log.events.compactMap { if case .volatileRange(let r) = $0 { Optional(r) } else { nil } }
        #expect(ranges.contains { $0 != nil })
        #expect(ranges.last! == nil, "the volatile range clears once everything is final")
    }

    @Test func withoutVolatileResultsOnlyFinalOnesArrive() async throws {
        let log = EventLog()
        let session = try session([Self.transcriber], log: log)
        let audio = (try Self.speech()) + Self.silence(1)
        await session.accept(Self.pcm(audio), format: .speech16k, start: nil)
        _ = await session.finish(.finalizeThroughEndOfInput, time: nil)
        #expect(!log.results.isEmpty)
        #expect(log.results.allSatisfy { $0.isFinal })
    }

    @Test func detectorReportsSpeechAndSilenceRanges() async throws {
        let log = EventLog()
        let detector = ModuleConfiguration(kind: .detector, locale: nil, reportingOptions: ["reportResults"], sensitivity: "medium")
        let session = try session([Self.transcriber, detector], log: log)
        let audio = Self.silence(1) + (try Self.speech()) + Self.silence(1.5)
        await session.accept(Self.pcm(audio), format: .speech16k, start: nil)
        _ = await session.finish(.finalizeThroughEndOfInput, time: nil)
        let detections = log.results.filter { $0.module == 1 }
        #expect(detections.map(\.speechDetected) == [false, true, false])
        // Contiguous, covering the whole input.
        #expect(detections.first?.range.start == .zero)
        for (a, b) in zip(detections, detections.dropFirst()) { #expect(a.range.end == b.range.start) }
        #expect(detections.last?.range.end == WireTime(value: Int64(audio.count), timescale: 16000))
    }

    @Test func finishAfterWaitsForInputToReachTheTime() async throws {
        let log = EventLog()
        let session = try session([Self.transcriber], log: log)
        let speech = try Self.speech() + Self.silence(1)
        let target = WireTime(value: Int64(speech.count * 2), timescale: 16000)
        async let finished = session.finish(.after, time: target)
        await session.accept(Self.pcm(speech), format: .speech16k, start: nil)
        #expect(log.finished.isEmpty)
        await session.accept(Self.pcm(speech), format: .speech16k, start: nil)
        #expect(await finished == target)
        #expect(log.finished.count == 1)
        #expect(log.finals.count == 2)
    }
}
