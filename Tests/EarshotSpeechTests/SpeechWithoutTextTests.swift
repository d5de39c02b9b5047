import EarshotAudio
@testable import EarshotSpeech
import EarshotEngineLink
import EarshotWire
import Foundation
import Testing
import TestSupport

/// A transcriber that gives nothing for any audio (speech it cannot make out).
struct HearsNothing: SegmentTranscribing {
    func transcribe(_ samples: [Float], sampleRate: Int, settings: DecodeSettings) throws -> Transcription { Transcription(text: "") }
}

/// Records what a session reports of speech without text.
final class LostSpeechLog: SpeechObserver, @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [WireTimeRange] = []
    var ranges: [WireTimeRange] { lock.withLock { stored } }
    func decoded(engine: String, audioSeconds: Double, computeSeconds: Double) {}
    func speechWithoutText(session: String, range: WireTimeRange) { lock.withLock { stored.append(range) } }
}

/// Issue 26: a window whose decode leaves segments without text while the detector says they hold
/// speech decodes them again, and what still has no text is flagged and reported, never passed off
/// as silence.
@Suite(.serialized) struct SpeechWithoutTextTests {
    /// Pieces of `seconds` each, filled with `values` (16 kHz).
    static func group(_ pieces: [(seconds: Double, value: Float)]) -> SegmentGroup {
        var group = SegmentGroup()
        var start: Int64 = 0
        for piece in pieces {
            let count = Int(piece.seconds * 16000)
            group.append(SpeechSegment(startSample: start, samples: [Float](repeating: piece.value, count: count)))
            start += Int64(count) + 16000
        }
        return group
    }

    @Test func aWindowThatEndsAtAnotherVoiceHasItsEmptySegmentsDecodedAgain() throws {
        let model = QuarterSecondWords(oneVoice: true)
        // The first reader, then three segments of another: the window's decode ends after the first.
        let group = Self.group([(2, 0.1), (3, 0.25), (2, 0.25), (2, 0.25)])
        let transcript = try group.transcribe(with: model, sampleRate: 16000)
        let shares = try #require(transcript.shares)
        #expect(shares.map { $0.words.count } == [8, 12, 8, 8], "every segment's words, each from its own start")
        #expect(transcript.unheard.isEmpty)
        // The window, then the three empty segments as a window of their own (one voice, heard
        // whole): one retry.
        #expect(model.calls == [9 * 16000, 7 * 16000])
        #expect(transcript.retries == 1)
        #expect(shares[1].words.first?.start == 0 && shares[3].language == "en")
    }

    @Test func aSegmentStillEmptyInItsRunIsDecodedAloneThenFlagged() throws {
        // Three voices: the run [1, 2] still stops at piece 2's voice; alone, piece 2 is heard.
        let model = QuarterSecondWords(oneVoice: true)
        let transcript = try Self.group([(2, 0.1), (2, 0.2), (2, 0.3)]).transcribe(with: model, sampleRate: 16000)
        #expect(try #require(transcript.shares).map { $0.words.count } == [8, 8, 8])
        #expect(model.calls == [6 * 16000, 4 * 16000, 2 * 16000], "the window, the run of pieces 1 and 2, piece 2 alone")
        #expect(transcript.unheard.isEmpty && transcript.retries == 2)

        // Nothing is ever heard: the whole window is not decoded again as it was, each piece is
        // decoded alone, and every piece of at least 1 s is flagged; shorter ones are not.
        let deaf = Self.group([(2, 0.1), (0.5, 0.1), (3, 0.1)])
        let nothing = try deaf.transcribe(with: HearsNothing(), sampleRate: 16000)
        #expect(nothing.unheard == [0, 2])
        #expect(nothing.retries == 2, "pieces 0 and 2 alone; the 0.5 s piece is not decoded again")
        // A one-piece window has no other boundary to try.
        let single = try Self.group([(3, 0.1)]).transcribe(with: HearsNothing(), sampleRate: 16000)
        #expect(single.unheard == [0] && single.retries == 0)
    }

    @Test func aRetryThatFindsTheWordsTheNeighbourTookAddsNothingAndFlagsNothing() throws {
        // Whisper's early word times gave piece 1's two words to piece 0 ("for them."); decoded
        // alone, piece 1 says them again: they are not repeated, and piece 1 is not lost speech.
        struct Repeats: SegmentTranscribing {
            func transcribe(_ samples: [Float], sampleRate: Int, settings: DecodeSettings) throws -> Transcription {
                if samples.count > 2 * 16000 {
                    let words = [("And", 0.2), ("for", 1.3), ("them.", 1.45)].map { RecognizedWord(text: $0.0, start: $0.1, end: $0.1 + 0.1) }
                    return Transcription(text: "And for them.", words: words)
                }
                return Transcription(text: "For them.", words: [RecognizedWord(text: "For", start: 0.1, end: 0.3), RecognizedWord(text: "them.", start: 0.4, end: 0.6)])
            }
        }
        let transcript = try Self.group([(1.5, 0.1), (1.2, 0.1)]).transcribe(with: Repeats(), sampleRate: 16000)
        #expect(try #require(transcript.shares).map(\.text) == ["And for them.", ""])
        #expect(transcript.unheard.isEmpty && transcript.retries == 1)
    }

    /// Found by the shifted-recording test: a window of 8 s read "… the winter of despair. (air
    /// whooshing) (air whooshing) (air whooshing) (air whooshing) (" — Whisper's sound captions,
    /// which OpenAI's decoder never writes (it suppresses their opening tokens). They are not words.
    @Test func whisperSoundCaptionsAreNotTakenForWords() {
        #expect(WhisperCaptions.speech(in: ["despair.", "(air", "whooshing)", "(air", "whooshing)", "("]) == ["despair."])
        #expect(WhisperCaptions.speech(in: ["[MUSIC]", "Hello", "♪♪", "world.", "(blues", "music)"]) == ["Hello", "world."])
        #expect(WhisperCaptions.speech(in: ["It's", "3:30,", "isn't", "it?"]) == ["It's", "3:30,", "isn't", "it?"])
        let tokens = [" It", " was.", " (", "air", " wh", "oosh", "ing", ")"]
        let result = EngineWhisperResult(id: "", text: tokens.joined(), language: "en", tokens: tokens,
                                         starts: (0..<tokens.count).map { Double($0) * 0.2 }, durations: nil, logProbabilities: nil)
        let transcription = WhisperModel.transcription(from: result, duration: 2)
        #expect(transcription.text == "It was." && transcription.words.map(\.text) == ["It", "was."])
        // Only a caption: no text, so the segment counts as speech without text.
        let caption = EngineWhisperResult(id: "", text: " (music)", language: "en", tokens: [" (", "music", ")"], starts: [0, 0.2, 0.4],
                                          durations: nil, logProbabilities: nil)
        #expect(SegmentGroup.isEmpty(WhisperModel.transcription(from: caption, duration: 1)))
    }

    func session(_ transcriber: any SegmentTranscribing, window seconds: Double, observer: LostSpeechLog, log: EventLog) throws -> AnalysisSession {
        try #require(FileManager.default.fileExists(atPath: SessionTests.vadModel), "run Scripts/setup.sh: it installs the Silero VAD model")
        let vad = try SileroDetector(configuration: .init(modelPath: SessionTests.vadModel, sensitivity: .medium))
        let modules = [SessionModule(index: 0, configuration: SessionTests.transcriber, engine: .segments(transcriber))]
        return AnalysisSession(id: "lost", modules: modules, vad: vad, decodeParallelism: 2, recordingWindow: Int(seconds * 16000),
                               observer: observer) { log.append($0) }
    }

    @Test(arguments: [0.0, 20])
    func speechWithoutTextIsFlaggedOnItsResultAndReportedOnce(window: Double) async throws {
        let observer = LostSpeechLog()
        let log = EventLog()
        let deaf = try session(HearsNothing(), window: window, observer: observer, log: log)
        await deaf.accept(SessionTests.pcm(try ConcurrentDecodeTests.audio()), format: .speech16k, start: nil)
        _ = await deaf.finish(.finalizeThroughEndOfInput, time: nil)
        let finals = log.finals
        #expect(finals.count == 3, "three utterances")
        #expect(finals.allSatisfy { $0.speechWithoutText == true && $0.text.isEmpty })
        // One report per stretch: the three segments of one window are consecutive.
        let expected = window == 0 ? finals.map(\.range) : [WireTimeRange(start: finals[0].range.start, end: finals[2].range.end)]
        #expect(observer.ranges == expected)
        // A result the transcriber heard carries no flag, on the wire either.
        let heard = EventLog()
        let words = try session(QuarterSecondWords(), window: window, observer: LostSpeechLog(), log: heard)
        await words.accept(SessionTests.pcm(try ConcurrentDecodeTests.audio()), format: .speech16k, start: nil)
        _ = await words.finish(.finalizeThroughEndOfInput, time: nil)
        #expect(heard.finals.allSatisfy { $0.speechWithoutText == nil })
        let encoded = String(decoding: try JSONEncoder().encode(heard.finals[0]), as: UTF8.self)
        #expect(!encoded.contains("speech_without_text"))
        #expect(String(decoding: try JSONEncoder().encode(finals[0]), as: UTF8.self).contains("\"speech_without_text\":true"))
    }
}

/// Issue 26 with real speech and the daemon's Whisper base: a recording whose windows run from
/// one reader into another comes back complete.
@Suite(.serialized) struct ReadersRecordingTests {
    static let available = SherpaFixture.baseAvailable && SherpaFixture.vadAvailable && EmbeddedModels.runs(PublicDomainReadings.present)
    static let missing: Comment = "needs Whisper base, silero and the moonshine-voice readings (Scripts/setup.sh)"

    /// Measured 1.0 % (2 errors in 203 words) when every passage comes back; losing the 40-word
    /// passage of the bug made it 25 %.
    static let werCeiling = 0.04

    struct Outcome {
        var wer: Double
        var finals: [AnalyzerResult]
        var hypothesis: String
    }

    /// Transcribes the readers' recording (with `leadingSilence`) as the daemon does a file:
    /// Whisper base, a `window`-second recording window, the speculative decode on.
    static func transcribe(leadingSilence: Double, window: Double, in directory: TempDirectory) async throws -> Outcome {
        let path = directory.file(String(format: "readers-%.2f.wav", leadingSilence))
        let reference = try PublicDomainReadings.writeReadersRecording(to: path, leadingSilence: leadingSilence)
        let samples = try AudioFileReader(path: path).readAll()
        let model = try SherpaFixture.base()
        var configuration = SileroDetector.Configuration.transcription
        configuration.modelPath = SessionTests.vadModel
        let vad = try SileroDetector(configuration: configuration)
        let log = EventLog()
        let modules = [SessionModule(index: 0, configuration: SessionTests.transcriber, engine: .segments(model))]
        let session = AnalysisSession(id: "readers", modules: modules, vad: vad, decodeParallelism: 2, recordingWindow: Int(window * 16000),
                                      speculativeBacklog: AnalysisSession.defaultSpeculativeBacklog) { log.append($0) }
        await session.accept(SessionTests.pcm(samples), format: .speech16k, start: nil)
        _ = await session.finish(.finalizeThroughEndOfInput, time: nil)
        #expect(log.finished.count == 1 && log.finished[0] == nil)
        let hypothesis = log.finals.map(\.text).joined(separator: " ")
        return Outcome(wer: LibriVox.wer([(reference, hypothesis)]), finals: log.finals, hypothesis: hypothesis)
    }

    /// Whether a result lost its speech: flagged, or empty over a second or more.
    static func lost(_ result: AnalyzerResult) -> Bool {
        result.speechWithoutText == true || (result.text.trimmingCharacters(in: .whitespaces).isEmpty && result.range.duration.seconds >= 1)
    }

    /// The bug: with the default 20 s window, Whisper base read "He might even have been made
    /// amiable himself." and ended the window there, so "It was the best of times … the season of
    /// darkness" (16 s, three segments) came back empty.
    @Test(.enabled(if: available, missing))
    func aPassageAcrossTwoReadersIsNotLostBetweenWindows() async throws {
        let directory = try TempDirectory("readers")
        defer { directory.remove() }
        let outcome = try await Self.transcribe(leadingSilence: 0, window: 20, in: directory)
        print("readers' recording: WER \(SherpaFixture.percent(outcome.wer)): \(outcome.hypothesis)")
        #expect(!outcome.finals.contains(where: Self.lost), "\(outcome.finals.filter(Self.lost).map(\.range))")
        #expect(outcome.wer <= Self.werCeiling)
        let words = WordErrorRate.words(outcome.hypothesis)
        for phrase in ["best of times", "age of foolishness", "epoch of incredulity", "season of darkness"] {
            let wanted = WordErrorRate.words(phrase)
            #expect((0...(words.count - wanted.count)).contains { Array(words[$0..<$0 + wanted.count]) == wanted }, "“\(phrase)” is missing")
        }
    }

    /// The same speech shifted by leading silence and cut at several recording windows always
    /// comes back complete: no segment with speech is empty, and the WER stays within a few words
    /// of the unshifted transcript's.
    @Test(.enabled(if: available, missing))
    func theReadersRecordingIsCompleteWhereverTheWindowsFall() async throws {
        let directory = try TempDirectory("readers-shifted")
        defer { directory.remove() }
        let baseline = try await Self.transcribe(leadingSilence: 0, window: 20, in: directory)
        var worst = (wer: 0.0, case: "")
        for window in [8.0, 14, 20] {
            for offset in [0.0, 0.5, 1.05, 1.6, 2.1, 2.6, 3.1] where !(window == 20 && offset == 0) {
                let outcome = try await Self.transcribe(leadingSilence: offset, window: window, in: directory)
                let label = "window \(window) s, \(offset) s of silence first"
                #expect(!outcome.finals.contains(where: Self.lost), "\(label): \(outcome.finals.filter(Self.lost).map(\.range))")
                // 0.06 of ~203 words: twelve words of margin, far below the 40 words of a lost
                // passage. How Whisper reads a window moves with where it is cut and with the CPU's
                // float rounding: on an AVX2 machine two cuts read "ill-disposed" as "ill-sposed"
                // twice and skipped the repeated clause "it was the worst of times" (8 words more
                // than the unshifted reading, with converter 4 and 5 alike); AVX-512 machines kept
                // within 6.
                #expect(outcome.wer <= baseline.wer + 0.06, "\(label): WER \(SherpaFixture.percent(outcome.wer)) — \(outcome.hypothesis)")
                if outcome.wer > worst.wer { worst = (outcome.wer, label) }
            }
        }
        print("readers' recording shifted: baseline WER \(SherpaFixture.percent(baseline.wer)), worst \(SherpaFixture.percent(worst.wer)) (\(worst.case))")
    }
}
