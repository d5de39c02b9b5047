@testable import EarshotSpeech
import EarshotWire
import Foundation
import Testing

/// A transcriber that hears one word per quarter second of the audio it is given ("w0", "w1", …,
/// timed), and counts its calls and the samples of each. With `oneVoice` it hears one voice only:
/// like Whisper on a window that runs from one reader into another, its text ends where the voice
/// changes (a sample of another value than the first), and each voice says its own words ("v25w0"
/// for the voice of value 0.25).
final class QuarterSecondWords: SegmentTranscribing, @unchecked Sendable {
    private let lock = NSLock()
    private var sizes: [Int] = []
    private let oneVoice: Bool
    var calls: [Int] { lock.withLock { sizes } }

    init(oneVoice: Bool = false) { self.oneVoice = oneVoice }

    func transcribe(_ samples: [Float], sampleRate: Int, settings: DecodeSettings) throws -> Transcription {
        lock.withLock { sizes.append(samples.count) }
        let quarter = Double(sampleRate) / 4
        let voice = samples.first ?? 0
        let heard = oneVoice ? samples.firstIndex { $0 != voice } ?? samples.count : samples.count
        let name = oneVoice ? "v\(Int(voice * 100))w" : "w"
        let words = (0..<Int(Double(heard) / quarter)).map {
            RecognizedWord(text: name + "\($0)", start: Double($0) / 4, end: Double($0 + 1) / 4, confidence: 0.5)
        }
        return Transcription(text: words.map(\.text).joined(separator: " "), words: words, confidence: 0.5, language: "en")
    }
}

/// A recording (`AnalysisInput.recording`) is decoded a window of consecutive segments at a time
/// (Whisper hears each utterance with its neighbours: on the LibriVox long form, base's WER went
/// from 3.8 % to 1.4 %), and each segment still gets its own final result.
@Suite(.serialized) struct RecordingWindowTests {
    static func words(_ spec: [(String, Double)]) -> [RecognizedWord] {
        spec.map { RecognizedWord(text: $0.0, start: $0.1, end: $0.1 + 0.2, confidence: 0.9) }
    }

    /// Two pieces of 1 s and 2 s (16 kHz), back to back.
    static func group(_ counts: [Int] = [16000, 32000]) -> SegmentGroup {
        var group = SegmentGroup()
        var start: Int64 = 1000
        for count in counts {
            group.append(SpeechSegment(startSample: start, samples: [Float](repeating: 0.1, count: count)))
            start += Int64(count) + 8000
        }
        return group
    }

    @Test func aWindowsWordsGoToThePieceTheyStartInWithTimesFromItsStart() throws {
        let group = Self.group([16000, 32000, 16000])
        #expect(group.pieces.map(\.offset) == [0, 16000, 48000])
        #expect(group.pieces.map(\.start) == [1000, 25000, 65000])
        let words = Self.words([("one", 0.1), ("two", 0.5), ("three", 1.2), ("four", 2.9), ("five", 3.5)])
        let shares = try #require(group.split(Transcription(text: "one two three four five", words: words, language: "en"), sampleRate: 16000))
        #expect(shares.map(\.text) == ["one two", "three four", "five"])
        #expect(shares.map { $0.words.map { (($0.start ?? -1) * 1000).rounded() } } == [[100, 500], [200, 1900], [500]])
        #expect(shares.allSatisfy { $0.language == "en" })
        #expect(abs((shares[0].confidence ?? 0) - 0.9) < 1e-9, "a share's confidence comes from its words")
    }

    @Test func aCutJustAfterAnUnpunctuatedWordMovesToTheNearestSentenceEnd() throws {
        let group = Self.group()
        // Whisper's times run early: "He" (the second utterance's first word) starts before the cut.
        let early = Self.words([("for", 0.3), ("them.", 0.6), ("He", 0.95), ("was", 1.3), ("not", 1.6)])
        let back = try #require(group.split(Transcription(text: "", words: early), sampleRate: 16000))
        #expect(back.map(\.text) == ["for them.", "He was not"])
        #expect(back[1].words.first?.start == 0, "a moved word starts at its piece's start")
        // And "them." starting after the cut goes back to the utterance it ends.
        let late = Self.words([("do", 0.5), ("for", 0.8), ("them.", 1.05), ("He", 1.4), ("was", 1.7)])
        #expect(try #require(group.split(Transcription(text: "", words: late), sampleRate: 16000)).map(\.text) == ["do for them.", "He was"])
        // A cut already after a punctuated word stays; one with no punctuation near keeps its time.
        let plain = Self.words([("a", 0.2), ("b,", 0.5), ("c", 1.1), ("d", 1.5)])
        #expect(try #require(group.split(Transcription(text: "", words: plain), sampleRate: 16000)).map(\.text) == ["a b,", "c d"])
        let none = Self.words([("a", 0.2), ("b", 0.5), ("c", 0.8), ("d", 0.9), ("e", 1.5)])
        #expect(try #require(group.split(Transcription(text: "", words: none), sampleRate: 16000)).map(\.text) == ["a b c d", "e"])
    }

    @Test func aWindowWithoutWordTimesCannotBeSplitAndSilenceGivesEveryPieceNothing() throws {
        let group = Self.group()
        #expect(group.split(Transcription(text: "no times", words: []), sampleRate: 16000) == nil)
        #expect(try #require(group.split(Transcription(text: " ", words: []), sampleRate: 16000)).map(\.text) == ["", ""])
        let single = Self.group([16000])
        let whole = Transcription(text: "no times", words: [])
        #expect(single.split(whole, sampleRate: 16000) == [whole])
    }

    func session(_ transcriber: any SegmentTranscribing, window seconds: Double, log: EventLog, volatile: Bool = false) throws -> AnalysisSession {
        try #require(FileManager.default.fileExists(atPath: SessionTests.vadModel), "run Scripts/setup.sh: it installs the Silero VAD model")
        let vad = try SileroDetector(configuration: .init(modelPath: SessionTests.vadModel, sensitivity: .medium))
        var configuration = SessionTests.transcriber
        if volatile { configuration.reportingOptions = ["volatileResults"] }
        let modules = [SessionModule(index: 0, configuration: configuration, engine: .segments(transcriber)),
                       SessionModule(index: 1, configuration: ConcurrentDecodeTests.detector, engine: .detector)]
        return AnalysisSession(id: "r", modules: modules, vad: vad, decodeParallelism: 2, recordingWindow: Int(seconds * 16000)) { log.append($0) }
    }

    @Test func aRecordingDecodesItsSegmentsInOneWindowAndGivesEachItsOwnResult() async throws {
        let audio = try ConcurrentDecodeTests.audio()
        let liveWords = QuarterSecondWords()
        let liveLog = EventLog()
        let live = try session(liveWords, window: 0, log: liveLog)
        await live.accept(SessionTests.pcm(audio), format: .speech16k, start: nil)
        _ = await live.finish(.finalizeThroughEndOfInput, time: nil)

        let words = QuarterSecondWords()
        let log = EventLog()
        let recording = try session(words, window: 20, log: log)
        await recording.accept(SessionTests.pcm(audio), format: .speech16k, start: nil)
        _ = await recording.finish(.finalizeThroughEndOfInput, time: nil)

        #expect(liveWords.calls.count == 3)
        #expect(words.calls == [liveWords.calls.reduce(0, +)], "one decode of the three segments back to back")
        let finals = log.finals.filter { $0.module == 0 }
        #expect(finals.map(\.range) == liveLog.finals.filter { $0.module == 0 }.map(\.range), "a result per segment, over the segment")
        #expect(finals.map(\.text).joined(separator: " ").split(separator: " ").count == words.calls[0] / 4000, "every word once")
        #expect(finals.allSatisfy { !$0.text.isEmpty })
        // Word times are on the stream's timeline, inside their segment's range.
        for result in finals {
            for run in result.runs { if let range = run.range { #expect(range.start >= result.range.start && range.end <= result.range.end) } }
        }
        // The detector's results are those of the live session, and the order of events is kept.
        #expect(log.finals.filter { $0.module == 1 }.map(\.range) == liveLog.finals.filter { $0.module == 1 }.map(\.range))
        #expect(log.finished.count == 1)
        #expect(await recording.retainedAudio().decoding == 0)
    }

    @Test func aWindowHoldsAtMostItsLengthAndVolatileModulesDecodeEachSegment() async throws {
        let audio = try ConcurrentDecodeTests.audio()
        let words = QuarterSecondWords()
        let short = try session(words, window: 5, log: EventLog())
        await short.accept(SessionTests.pcm(audio), format: .speech16k, start: nil)
        _ = await short.finish(.finalizeThroughEndOfInput, time: nil)
        #expect(words.calls.count == 3 && words.calls.allSatisfy { $0 <= 5 * 16000 }, "\(words.calls)")

        var calls: [[Int]] = []
        for window in [0.0, 20] {
            let volatileWords = QuarterSecondWords()
            let volatile = try session(volatileWords, window: window, log: EventLog(), volatile: true)
            await volatile.accept(SessionTests.pcm(audio), format: .speech16k, start: nil)
            _ = await volatile.finish(.finalizeThroughEndOfInput, time: nil)
            calls.append(volatileWords.calls)
        }
        #expect(calls[0].count > 3 && calls[1] == calls[0], "a module with volatile results decodes as for live input")
    }

    /// A session that ends without finalizing while a window is being gathered must still finish:
    /// the window's place among the events is given up and its samples go back to the budget.
    @Test func cancellingARecordingWithAWindowGatheredFinishesAndHoldsNothing() async throws {
        let words = QuarterSecondWords()
        let log = EventLog()
        let recording = try session(words, window: 20, log: log)
        // Two segments ended (gathered, not yet decoded); the third is still open.
        await recording.accept(SessionTests.pcm(try ConcurrentDecodeTests.audio()), format: .speech16k, start: nil)
        #expect(await recording.retainedAudio().decoding > 0, "the gathered segments are counted")
        _ = await recording.finish(.cancelNow, time: nil)
        #expect(words.calls.isEmpty)
        #expect(log.finals.filter { $0.module == 0 }.isEmpty)
        #expect(log.finished.count == 1)
        #expect(await recording.retainedAudio().decoding == 0)
    }
}

/// A transcriber that records the earlier text every call is given, and hears "cNwI" (call N,
/// word I) for each quarter second.
final class PromptRecorder: SegmentTranscribing, @unchecked Sendable {
    private let lock = NSLock()
    private var recorded: [String?] = []
    var prompts: [String?] { lock.withLock { recorded } }

    func transcribe(_ samples: [Float], sampleRate: Int, settings: DecodeSettings) throws -> Transcription {
        let call = lock.withLock {
            recorded.append(settings.previousText)
            return recorded.count - 1
        }
        let words = (0..<max(1, samples.count / 4000)).map { RecognizedWord(text: "c\(call)w\($0)", start: Double($0) / 4, end: Double($0 + 1) / 4) }
        return Transcription(text: words.map(\.text).joined(separator: " "), words: words, language: "en")
    }
}

extension RecordingWindowTests {
    /// `audio` through a session of 1 s recording windows on two decode lanes, its one module a
    /// ``PromptRecorder``.
    static func recordInOneSecondWindows(_ audio: [Float], conditioned: Bool) async throws -> (PromptRecorder, EventLog) {
        let recorder = PromptRecorder()
        let vad = try SileroDetector(configuration: .init(modelPath: SessionTests.vadModel, sensitivity: .medium))
        let modules = [SessionModule(index: 0, configuration: SessionTests.transcriber, engine: .segments(recorder))]
        let log = EventLog()
        let session = AnalysisSession(id: "c", modules: modules, vad: vad, decodeParallelism: 2, recordingWindow: 16000,
                                      conditionOnPreviousText: conditioned) { log.append($0) }
        await session.accept(SessionTests.pcm(audio), format: .speech16k, start: nil)
        _ = await session.finish(.finalizeThroughEndOfInput, time: nil)
        return (recorder, log)
    }

    /// What each window of `texts` is prompted with: all the text before it (none for the first).
    static func textsBefore(_ texts: [String]) -> [String?] {
        texts.indices.map { $0 == 0 ? nil : texts[..<$0].joined(separator: " ") }
    }

    /// With `ConditionOnPreviousText`, a recording's windows decode one at a time, each prompted
    /// with the text of the windows before (faster-whisper's condition_on_previous_text: all
    /// the text since the last reset, not the last window's alone); without, they decode side
    /// by side and unprompted.
    @Test func conditionedWindowsDecodeInTurnEachPromptedWithTheTextBefore() async throws {
        let audio = try ConcurrentDecodeTests.audio()
        for conditioned in [true, false] {
            let (recorder, log) = try await Self.recordInOneSecondWindows(audio, conditioned: conditioned)
            let prompts = recorder.prompts
            let texts = log.finals.filter { $0.module == 0 }.map(\.text)
            #expect(prompts.count == 3 && texts.count == 3, "one window per segment: \(prompts) \(texts)")
            if conditioned {
                // Each prompt is the text of the windows before, so they had finished.
                #expect(prompts == Self.textsBefore(texts), "\(prompts) \(texts)")
            } else {
                #expect(prompts.allSatisfy { $0 == nil })
            }
        }
    }
}

extension RecordingWindowTests {
    /// The bug (found by vs-faster-whisper.sh): conditioned windows first waited for their
    /// predecessor on the session's queue, holding their reserved samples; once those filled the
    /// session's decode window (30 s), gathering the next segment waited on the queue for samples
    /// that only the waiting windows' decodes could give back, and a 5.9 min file stalled until
    /// the client gave up. Windows now wait on their decode lane, so a long recording of 1 s
    /// windows (well over 30 s in all) finishes, every window prompted with the ones before.
    @Test func conditionedWindowsOfALongRecordingNeverStallTheSession() async throws {
        let one = try ConcurrentDecodeTests.audio()
        let audio = Array(repeating: one, count: 8).flatMap { $0 }
        #expect(audio.count > 2 * AnalysisSession.maxDecodingSamples)
        let (recorder, log) = try await Self.recordInOneSecondWindows(audio, conditioned: true)
        let texts = log.finals.filter { $0.module == 0 }.map(\.text)
        #expect(texts.count == 24, "\(texts.count) windows")
        #expect(recorder.prompts == Self.textsBefore(texts))
    }
}

extension RecordingWindowTests {
    /// The text a window passes on is everything since the last reset, its end kept within
    /// ``TextRelay/maxCharacters`` (cut at a word); nil resets it.
    @Test func theTextPassedOnKeepsItsEndWithinItsBound() throws {
        let relay = TextRelay()
        let links = (0..<4).map { _ in relay.link() }
        #expect(links[0].previousText() == nil)
        links[0].pass("one two", after: nil)
        let second = links[1].previousText()
        #expect(second == "one two")
        let long = (0..<2000).map { "w\($0)" }.joined(separator: " ")
        links[1].pass(long, after: second)
        let third = try #require(links[2].previousText())
        #expect(third.count <= TextRelay.maxCharacters && third.count > TextRelay.maxCharacters - 64)
        #expect(long.hasSuffix(third) && !third.hasPrefix(" ") && third.hasPrefix("w"), "cut at a word: \(third.prefix(12))")
        links[2].pass(nil, after: third)
        #expect(links[3].previousText() == nil)
    }
}
