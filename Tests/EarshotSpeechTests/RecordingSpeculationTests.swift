@testable import EarshotSpeech
import EarshotWire
import Foundation
import Testing

/// A recording that fits in one window is decoded whole at audio-stop, while the detector still
/// reads it (`RecordingSpeculation`); the result is kept only when the detector's segments make
/// that one window, and each segment still gets its own share.
@Suite(.serialized) struct RecordingSpeculationTests {
    /// `speculative`: decodes speculatively whatever the VAD has left to read at audio-stop.
    func session(_ transcriber: any SegmentTranscribing, speculative: Bool, backlog: Double = 0, log: EventLog) throws -> AnalysisSession {
        try #require(FileManager.default.fileExists(atPath: SessionTests.vadModel), "run Scripts/setup.sh: it installs the Silero VAD model")
        let vad = try SileroDetector(configuration: .init(modelPath: SessionTests.vadModel, sensitivity: .medium))
        let modules = [SessionModule(index: 0, configuration: SessionTests.transcriber, engine: .segments(transcriber)),
                       SessionModule(index: 1, configuration: ConcurrentDecodeTests.detector, engine: .detector)]
        return AnalysisSession(id: "sp", modules: modules, vad: vad, decodeParallelism: 2, recordingWindow: 20 * 16000,
                               speculativeBacklog: speculative ? backlog : nil) { log.append($0) }
    }

    /// Two utterances with little silence around them (6.8 s).
    static func shortRecording() throws -> [Float] {
        let speech = try SessionTests.speech()
        return SessionTests.silence(0.3) + speech + SessionTests.silence(0.5) + speech
    }

    /// Runs `audio` through a session in 1 s chunks, then finishes it; returns the transcriber's
    /// calls, the final results of both modules and the session.
    func transcribe(_ audio: [Float], speculative: Bool) async throws -> (calls: [Int], log: EventLog, session: AnalysisSession) {
        let words = QuarterSecondWords()
        let log = EventLog()
        let session = try session(words, speculative: speculative, log: log)
        let pcm = SessionTests.pcm(audio)
        for start in stride(from: 0, to: pcm.count, by: 32000) {
            await session.accept(Array(pcm[start..<min(start + 32000, pcm.count)]), format: .speech16k, start: nil)
        }
        #expect(await session.retainedAudio().speculative <= 20 * 16000)
        _ = await session.finish(.finalizeThroughEndOfInput, time: nil)
        return (words.calls, log, session)
    }

    @Test func aShortRecordingIsDecodedWholeAtAudioStopAndEachSegmentGetsItsShare() async throws {
        let audio = try Self.shortRecording()
        let usual = try await transcribe(audio, speculative: false)
        let speculated = try await transcribe(audio, speculative: true)

        #expect(usual.calls.count == 1 && usual.calls[0] < audio.count, "without it, one window of the segments")
        #expect(speculated.calls == [audio.count], "one decode of the whole input, from its first sample")
        let finals = speculated.log.finals.filter { $0.module == 0 }
        #expect(finals.map(\.range) == usual.log.finals.filter { $0.module == 0 }.map(\.range), "a result per segment, over the segment")
        #expect(finals.map(\.text).joined(separator: " ").split(separator: " ").count == audio.count / 4000, "every word of the decode once")
        for result in finals {
            for run in result.runs { if let range = run.range { #expect(range.start >= result.range.start && range.end <= result.range.end) } }
        }
        // Word times are the decode's, on the stream's timeline: "w4" is heard at 1.0 s.
        let w4 = try #require(finals.flatMap(\.runs).first { $0.text.trimmingCharacters(in: .whitespaces) == "w4" }?.range)
        #expect(w4.start.converted(to: 16000).value == 16000)
        #expect(speculated.log.finals.filter { $0.module == 1 }.map(\.range) == usual.log.finals.filter { $0.module == 1 }.map(\.range))
        #expect(speculated.log.finished.count == 1 && speculated.log.finished[0] == nil)
        let held = await speculated.session.retainedAudio()
        #expect(held.decoding == 0 && held.speculative == 0, "nothing held once finished: \(held)")
    }

    @Test func inputTheDetectorHasReadByAudioStopDecodesAsUsual() async throws {
        // A voice assistant streams in real time: by audio-stop the VAD has read everything, and a
        // decode of the whole input would only add the silence around the speech.
        let audio = try Self.shortRecording()
        let words = QuarterSecondWords()
        let session = try session(words, speculative: true, backlog: AnalysisSession.defaultSpeculativeBacklog, log: EventLog())
        await session.accept(SessionTests.pcm(audio), format: .speech16k, start: nil)
        #expect(await session.retainedAudio().speculative == audio.count, "kept until audio-stop")
        _ = await session.finish(.finalizeThroughEndOfInput, time: nil)
        #expect(words.calls.count == 1 && words.calls[0] < audio.count, "one window of the segments: \(words.calls)")
        #expect(await session.retainedAudio().speculative == 0)
    }

    @Test func aRecordingMostlySilentKeepsTheUsualWindowAfterTheSpeculativeDecode() async throws {
        let audio = SessionTests.silence(3) + (try SessionTests.speech()) + SessionTests.silence(3)
        let usual = try await transcribe(audio, speculative: false)
        let speculated = try await transcribe(audio, speculative: true)

        // Whisper makes words up in long silence: the whole decode is dropped for the window's.
        #expect(speculated.calls == [audio.count] + usual.calls, "the speculative decode, then the window's")
        #expect(speculated.log.finals.map(\.range) == usual.log.finals.map(\.range))
        #expect(speculated.log.finals.map(\.text) == usual.log.finals.map(\.text))
        #expect(await speculated.session.retainedAudio().decoding == 0)
    }

    @Test func inputAfterAFinalizeIsDecodedAsUsualAfterTheSpeculativeWindow() async throws {
        let speech = try SessionTests.speech()
        let words = QuarterSecondWords()
        let log = EventLog()
        let session = try session(words, speculative: true, log: log)
        let first = SessionTests.silence(0.3) + speech
        await session.accept(SessionTests.pcm(first), format: .speech16k, start: nil)
        _ = await session.finalize(through: nil)
        await session.accept(SessionTests.pcm(SessionTests.silence(0.3) + speech), format: .speech16k, start: nil)
        _ = await session.finish(.finalizeThroughEndOfInput, time: nil)

        #expect(words.calls.count == 2)
        #expect(words.calls.first == first.count, "the input up to the finalize, decoded whole")
        #expect(words.calls.last.map { $0 < speech.count + 16000 } == true, "the rest is a window of its segments")
        let finals = log.finals.filter { $0.module == 0 }
        #expect(finals.count == 2)
        #expect(zip(finals, finals.dropFirst()).allSatisfy { $0.range.end <= $1.range.start }, "results in stream order")
        #expect(log.finished.count == 1 && log.finished[0] == nil)
    }

    @Test func discontiguousCutOrTooLongInputIsNeverDecodedSpeculatively() async throws {
        let speech = try SessionTests.speech()
        // A gap in the timeline.
        let gapped = QuarterSecondWords()
        let gappedSession = try session(gapped, speculative: true, log: EventLog())
        await gappedSession.accept(SessionTests.pcm(speech), format: .speech16k, start: .zero)
        await gappedSession.accept(SessionTests.pcm(speech), format: .speech16k, start: WireTime(value: 5 * 16000, timescale: 16000))
        _ = await gappedSession.finish(.finalizeThroughEndOfInput, time: nil)
        #expect(!gapped.calls.isEmpty && gapped.calls.allSatisfy { $0 < 2 * speech.count }, "\(gapped.calls)")

        // Audio dropped by cancelAnalysis(before:).
        let cut = QuarterSecondWords()
        let cutSession = try session(cut, speculative: true, log: EventLog())
        cutSession.cancelAnalysis(before: WireTime(value: 8000, timescale: 16000))
        await cutSession.accept(SessionTests.pcm(speech + speech), format: .speech16k, start: nil)
        _ = await cutSession.finish(.finalizeThroughEndOfInput, time: nil)
        #expect(!cut.calls.isEmpty && !cut.calls.contains(2 * speech.count), "\(cut.calls)")

        // More than one window.
        let long = QuarterSecondWords()
        let longSession = try session(long, speculative: true, log: EventLog())
        let recording = (0..<8).flatMap { _ in SessionTests.silence(0.3) + speech }
        await longSession.accept(SessionTests.pcm(recording), format: .speech16k, start: nil)
        #expect(await longSession.retainedAudio().speculative == 0, "a recording longer than the window is not kept")
        _ = await longSession.finish(.finalizeThroughEndOfInput, time: nil)
        #expect(long.calls.count >= 2 && !long.calls.contains(recording.count), "\(long.calls)")
    }

    /// A model whose engine went away: every decode fails.
    struct FailingModel: SegmentTranscribing {
        struct EngineGone: Error {}
        func transcribe(_ samples: [Float], sampleRate: Int, settings: DecodeSettings) throws -> Transcription { throw EngineGone() }
    }

    /// Regression: a decode that failed after the client asked to finish ended the session
    /// without an error (`finished` was already queued without one), so the client got no text and
    /// no reason.
    @Test(arguments: [true, false]) func aDecodeFailingAfterFinishWasAskedEndsTheSessionWithItsError(speculative: Bool) async throws {
        let log = EventLog()
        let session = try session(FailingModel(), speculative: speculative, log: log)
        await session.accept(SessionTests.pcm(try Self.shortRecording()), format: .speech16k, start: nil)
        _ = await session.finish(.finalizeThroughEndOfInput, time: nil)
        #expect(log.finished.count == 1)
        #expect(log.finished.first.map { $0 != nil } == true, "the decode's failure ends the session, typed")
        #expect(log.finals.filter { $0.module == 0 }.isEmpty)
        let held = await session.retainedAudio()
        #expect(held.decoding == 0 && held.speculative == 0, "\(held)")
    }

    @Test func aPlacedWindowsWordsGoToTheSegmentTheyStartInWithTimesFromItsStart() throws {
        // Segments at 0.5–1.5 s and 2–3 s of the input; the decode's times are from the input's start.
        var group = SegmentGroup()
        group.append(SpeechSegment(startSample: 8000, samples: [Float](repeating: 0.1, count: 16000)))
        group.append(SpeechSegment(startSample: 32000, samples: [Float](repeating: 0.1, count: 16000)))
        let placed = group.inPlace
        #expect(placed.pieces.map(\.offset) == [8000, 32000] && placed.samples.isEmpty && placed.speechSamples == 32000)
        let words = RecordingWindowTests.words([("a", 0.3), ("b", 0.9), ("c.", 1.6), ("d", 2.2), ("e", 3.1)])
        let shares = try #require(placed.split(Transcription(text: "a b c. d e", words: words), sampleRate: 16000))
        #expect(shares.map(\.text) == ["a b c.", "d e"])
        #expect(shares.map { $0.words.map { (($0.start ?? -1) * 1000).rounded() } } == [[0, 400, 1000], [200, 1000]])

        // One segment keeps the decode's text; its words move to the segment's time.
        var single = SegmentGroup()
        single.append(SpeechSegment(startSample: 8000, samples: [Float](repeating: 0.1, count: 16000)))
        let whole = Transcription(text: "a b", words: RecordingWindowTests.words([("a", 0.7), ("b", 1.2)]), confidence: 0.8, language: "en")
        let one = try #require(single.inPlace.split(whole, sampleRate: 16000))
        #expect(one.count == 1 && one[0].text == "a b" && one[0].confidence == 0.8)
        #expect(one[0].words.map { (($0.start ?? -1) * 1000).rounded() } == [200, 700])
    }
}
