import EarshotAudio
@testable import EarshotSpeech
import Foundation
import Testing
import TestSupport

/// Whisper base in-process: languages named and identified, translation, and the word grouping of
/// token timestamps. Part of the serialized sherpa-onnx suite.
extension SherpaOnnxTests {
    static let speechAvailable = SherpaFixture.baseAvailable && EmbeddedModels.runs(SynthesizedSpeech.available)

    /// 16 kHz mono samples of `speech` as espeak-ng speaks it.
    static func samples(_ speech: SynthesizedSpeech, in directory: TempDirectory) async throws -> [Float] {
        let reader = try AudioFileReader(path: try await speech.wav(in: directory))
        let mono = PCM.downmix(try reader.readAll(), channels: reader.channels)
        return try Resampler.convert(mono, from: reader.sampleRate, to: 16000, channels: 1)
    }

    @Test(.enabled(if: speechAvailable, "needs Whisper base and espeak-ng (Scripts/setup.sh)"))
    func identifiesSpanishGermanAndFrenchAndKeepsTheirContentWords() async throws {
        let directory = try TempDirectory("ml")
        defer { directory.remove() }
        let model = try SherpaFixture.base(language: nil)
        for speech in SynthesizedSpeech.all {
            let result = try model.transcribe(try await Self.samples(speech, in: directory), sampleRate: 16000)
            print("  \(speech.language) identified as \(result.language ?? "nil"): \(result.text)")
            #expect(result.language == speech.language)
            let words = SynthesizedSpeech.words(result.text)
            for word in speech.contentWords { #expect(words.contains(word), "\(word) in \(result.text)") }
        }
    }

    @Test(.enabled(if: speechAvailable, "needs Whisper base and espeak-ng (Scripts/setup.sh)"))
    func aNamedLanguageIsTranscribedAsThatLanguage() async throws {
        let directory = try TempDirectory("ml")
        defer { directory.remove() }
        let result = try SherpaFixture.base(language: "de").transcribe(try await Self.samples(.german, in: directory), sampleRate: 16000)
        #expect(result.language == "de")
        for word in SynthesizedSpeech.german.contentWords {
            #expect(SynthesizedSpeech.words(result.text).contains(word), "\(word) in \(result.text)")
        }
    }

    @Test(.enabled(if: speechAvailable, "needs Whisper base and espeak-ng (Scripts/setup.sh)"))
    func translationGivesEnglish() async throws {
        let directory = try TempDirectory("ml")
        defer { directory.remove() }
        let model = try SherpaFixture.base(language: nil, task: .translate)
        for speech in [SynthesizedSpeech.spanish, .german] {
            let result = try model.transcribe(try await Self.samples(speech, in: directory), sampleRate: 16000)
            print("  \(speech.language) → en: \(result.text)")
            let words = SynthesizedSpeech.words(result.text)
            #expect(speech.englishWords.filter(words.contains).count >= 2, "\(speech.englishWords) in \(result.text)")
        }
    }

    @Test func anUnknownWhisperLanguageIsRefusedBeforeTheEngineSeesIt() throws {
        let files = WhisperModel.Files(encoder: "/dev/null", decoder: "/dev/null", tokens: "/dev/null")
        #expect(throws: SherpaOnnxError.invalidInput("Whisper has no language \"xx\"")) { try WhisperModel(files: files, language: "xx") }
        #expect(WhisperLanguage.whisperCode(for: "de-AT") == "de")
        #expect(WhisperLanguage.whisperCode(for: "jv") == "jw")
        #expect(WhisperLanguage.whisperCode(for: "und") == nil)
        #expect(WhisperLanguage.whisperCode(for: "tlh") == nil)
        #expect(WhisperLanguage.bcp47(forWhisperCode: "<|jw|>") == "jv")
        #expect(WhisperLanguage.bcp47(forWhisperCode: "iw") == "he")
        #expect(WhisperLanguage.bcp47Tags.count == 99)
    }

    @Test func tokensGroupIntoWordsWithMonotonicTimesInsideTheAudio() {
        let tokens = [
            WhisperToken(text: " Hel", start: 0.10, duration: 0.1, logProbability: log(0.9)),
            WhisperToken(text: "lo", start: 0.20, duration: 0.1, logProbability: log(0.4)),
            WhisperToken(text: ",", start: 0.30, duration: nil, logProbability: nil),
            WhisperToken(text: " world", start: 0.05, duration: nil, logProbability: log(0.8)),
            WhisperToken(text: " again", start: 1.90, duration: 0.5, logProbability: nil),
        ]
        let words = WhisperToken.words(tokens, duration: 2.0)
        #expect(words.map(\.text) == ["Hello,", "world", "again"])
        // "Hello," ends where the next word starts (its last token has no duration), never before
        // its own start; its confidence is the geometric mean of its tokens' probabilities.
        #expect(words[0].start == 0.10 && words[0].end == 0.10)
        #expect(abs((words[0].confidence ?? 0) - 0.6) < 1e-9)
        // A start before the previous word's is moved up to it; an end past the audio is clamped.
        #expect(words[1].start == 0.10 && words[1].end == 1.90)
        #expect(words[2].start == 1.90 && words[2].end == 2.0)
        #expect(words[2].confidence == nil)
        #expect(WhisperToken.words([], duration: 1).isEmpty)
    }
}
