import EarshotWire
import EarshotAudio
import EarshotSpeech
import Foundation
import Testing
import TestSupport

extension SherpaOnnxTests {
    @Test(.enabled(if: SherpaFixture.bothAvailable, "needs Whisper tiny.en and the silero VAD model (Scripts/setup.sh)"))
    func longRecordingIsTranscribedCompletely() throws {
        let model = try SherpaFixture.model()
        let (samples, spans) = try SherpaFixture.concatenation(longerThan: 60, silence: 1)
        let utterances = Dictionary(uniqueKeysWithValues: try SherpaFixture.utterances().map { ($0.id, $0.reference) })
        let started = Date()
        let segments = try LongFormTranscriber(model: model).transcribe(samples)
        let elapsed = Date().timeIntervalSince(started)
        let seconds = Double(samples.count) / 16000
        let reference = spans.map { utterances[$0.id]! }.joined(separator: " ")
        let hypothesis = SherpaFixture.normalized(segments.map(\.transcription.text).joined(separator: " "))
        let wer = WordErrorRate.rate([(reference, hypothesis)])
        print("long form: \(String(format: "%.1f", seconds)) s, \(spans.count) utterances → \(segments.count) segments, WER \(SherpaFixture.percent(wer)), \(String(format: "%.2f", elapsed)) s (RTF \(SherpaFixture.format(elapsed / seconds)), VAD included)")
        for segment in segments {
            print(String(format: "  %6.2f–%6.2f ", segment.start, segment.end) + segment.transcription.text)
        }
        #expect(seconds > 60)
        #expect(wer <= SherpaFixture.longFormWERCeiling)
        // In order, disjoint, each within one decode, one per utterance or a few more.
        for (previous, next) in zip(segments, segments.dropFirst()) {
            #expect(previous.startSample + Int64(previous.sampleCount) <= next.startSample)
        }
        #expect(segments.allSatisfy { Double($0.sampleCount) / 16000 <= WhisperModel.maximumDuration })
        #expect(segments.count >= spans.count && segments.count <= spans.count + 3)
        // Every utterance's words are there: each utterance's text aligns with the hypothesis
        // with few errors (its words, in order, appear in the segments overlapping it).
        for span in spans {
            let overlapping = segments.filter {
                Int($0.startSample) < span.range.upperBound && Int($0.startSample) + $0.sampleCount > span.range.lowerBound
            }
            let text = SherpaFixture.normalized(overlapping.map(\.transcription.text).joined(separator: " "))
            let words = WordErrorRate.words(utterances[span.id]!)
            let found = words.filter { WordErrorRate.words(text).contains($0) }.count
            #expect(Double(found) >= 0.6 * Double(words.count), "utterance \(span.id): only \(found) of \(words.count) words in “\(text)”")
        }
    }

    @Test(.enabled(if: SherpaFixture.bothAvailable, "needs Whisper tiny.en and the silero VAD model (Scripts/setup.sh)"))
    func continuousSpeechSplitForWhisperKeepsEveryWord() throws {
        // ~50 s without a pause long enough to end a segment: split by length.
        let model = try SherpaFixture.model()
        let (samples, spans) = try SherpaFixture.concatenation(longerThan: 45, silence: 0)
        let utterances = Dictionary(uniqueKeysWithValues: try SherpaFixture.utterances().map { ($0.id, $0.reference) })
        let segments = try LongFormTranscriber(model: model).transcribe(samples)
        let reference = spans.map { utterances[$0.id]! }.joined(separator: " ")
        let hypothesis = SherpaFixture.normalized(segments.map(\.transcription.text).joined(separator: " "))
        let wer = WordErrorRate.rate([(reference, hypothesis)])
        print("continuous \(samples.count / 16000) s → \(segments.count) segments (" + segments.map { String(format: "%.1f s", Double($0.sampleCount) / 16000) }.joined(separator: ", ") + "), WER \(SherpaFixture.percent(wer))")
        #expect(segments.count >= 2)
        #expect(wer <= SherpaFixture.continuousWERCeiling)
    }

    @Test(.enabled(if: SherpaFixture.bothAvailable, "needs Whisper tiny.en and the silero VAD model (Scripts/setup.sh)"))
    func fileTranscriptionReadsAndResamples() throws {
        // A LibriVox file as it is (16 kHz mono) and converted to 44.1 kHz stereo 16-bit WAV.
        let model = try SherpaFixture.model()
        let utterance = try SherpaFixture.utterances()[0]
        let transcriber = LongFormTranscriber(model: model)
        func wer(_ segments: [LongFormTranscriber.Segment]) -> Double {
            WordErrorRate.rate([(utterance.reference, SherpaFixture.normalized(segments.map(\.transcription.text).joined(separator: " ")))])
        }
        let direct = try transcriber.transcribe(file: "/usr/share/pocketsphinx/test/data/librivox/\(utterance.id).wav")
        #expect(wer(direct) <= 0.1)

        let directory = try TempDirectory("sherpa")
        defer { directory.remove() }
        let resampled = try Resampler.convert(utterance.samples, from: 16000, to: 44100, channels: 1)
        let path = directory.file("stereo.wav")
        try Self.wav(resampled.flatMap { [$0, $0] }, rate: 44100, channels: 2).write(to: URL(fileURLWithPath: path))
        let converted = try transcriber.transcribe(file: path)
        #expect(wer(converted) <= 0.1)
        let total = Double(utterance.samples.count) / 16000
        #expect(converted.allSatisfy { $0.end <= total + 0.05 })

        #expect(throws: AudioError.self) { try transcriber.transcribe(file: "/nonexistent.wav") }
    }

    /// A 16-bit PCM WAV file of interleaved `samples`.
    static func wav(_ samples: [Float], rate: Int, channels: Int) -> Data {
        func le<T: FixedWidthInteger>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value.littleEndian, Array.init) }
        let pcm = PCMSamples.s16le(samples)
        var data = Array("RIFF".utf8) + le(UInt32(36 + pcm.count)) + Array("WAVEfmt ".utf8)
        data += le(UInt32(16)) + le(UInt16(1)) + le(UInt16(channels)) + le(UInt32(rate))
        data += le(UInt32(rate * channels * 2)) + le(UInt16(channels * 2)) + le(UInt16(16))
        data += Array("data".utf8) + le(UInt32(pcm.count)) + pcm
        return Data(data)
    }
}
