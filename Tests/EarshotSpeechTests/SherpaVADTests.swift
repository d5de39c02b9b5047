import EarshotSpeech
import Foundation
import Testing
import TestSupport

extension SherpaOnnxTests {
    /// Runs `samples` through a detector in `chunk`-sized pieces; all segments in order.
    static func detect(_ samples: [Float], _ configuration: SileroDetector.Configuration, chunk: Int = 4000) throws -> [SpeechSegment] {
        try detect(samples, with: try SileroDetector(configuration: configuration), chunk: chunk)
    }

    /// Runs `samples` through `detector` (from its current state).
    static func detect(_ samples: [Float], with detector: SileroDetector, chunk: Int = 4000) throws -> [SpeechSegment] {
        var segments: [SpeechSegment] = []
        for start in stride(from: 0, to: samples.count, by: chunk) {
            try detector.accept(Array(samples[start..<min(start + chunk, samples.count)]))
            segments += detector.popSegments()
        }
        try detector.flush()
        segments += detector.popSegments()
        #expect(!detector.isSpeech)
        #expect(detector.samplesAccepted == Int64(samples.count))
        return segments
    }

    static func describe(_ segments: [SpeechSegment]) -> String {
        segments.map { String(format: "%.2f–%.2f", Double($0.startSample) / 16000, Double($0.startSample + Int64($0.samples.count)) / 16000) }
            .joined(separator: ", ")
    }

    @Test(.enabled(if: SherpaFixture.vadAvailable, SherpaFixture.vadMissing))
    func sileroSegmentsMatchTheSpeechRegions() throws {
        let (samples, spans) = try SherpaFixture.concatenation(longerThan: 60, silence: 1)
        let segments = try Self.detect(samples, SileroDetector.Configuration())
        print("silero VAD on \(spans.count) utterances (\(samples.count / 16000) s): \(segments.count) segments: \(Self.describe(segments))")
        // Segments are in order, disjoint, and carry exactly the input's samples.
        for (previous, next) in zip(segments, segments.dropFirst()) {
            #expect(previous.startSample + Int64(previous.samples.count) <= next.startSample)
        }
        for segment in segments {
            let start = Int(segment.startSample)
            #expect(Array(samples[start..<(start + segment.samples.count)]) == segment.samples)
        }
        let ranges = segments.map { Int($0.startSample)..<(Int($0.startSample) + $0.samples.count) }
        func covered(_ span: Range<Int>) -> Int { ranges.reduce(0) { $0 + ($1.clamped(to: span)).count } }
        // Every utterance is found, and nearly all of it is inside segments (the files carry
        // ~0.3 s of leading silence of their own).
        for span in spans {
            #expect(ranges.contains { $0.overlaps(span.range) }, "utterance \(span.id) at \(span.range) not detected")
            #expect(Double(covered(span.range)) >= 0.85 * Double(span.range.count), "utterance \(span.id) mostly missed")
        }
        // The inserted silences are barely covered (segment edges may reach into them).
        let gaps = zip(spans, spans.dropFirst()).map { $0.range.upperBound..<$1.range.lowerBound }
        let speechInGaps = gaps.reduce(0) { $0 + covered($1) }
        let gapSamples = gaps.reduce(0) { $0 + $1.count }
        print("  speech detected inside the inserted silences: \(SherpaFixture.percent(Double(speechInGaps) / Double(gapSamples)))")
        #expect(Double(speechInGaps) <= 0.2 * Double(gapSamples))
        #expect(segments.count >= spans.count && segments.count <= 2 * spans.count)

        // Padded for a recognizer, the segments grow but report the same speech.
        let padded = try SileroDetector(configuration: .transcription)
        var detected: [SileroDetector.DetectedSpeech] = []
        for start in stride(from: 0, to: samples.count, by: 4000) {
            try padded.accept(Array(samples[start..<min(start + 4000, samples.count)]))
            detected += padded.popDetectedSpeech()
        }
        try padded.flush()
        detected += padded.popDetectedSpeech()
        #expect(detected.map(\.speech) == segments.map { $0.startSample..<($0.startSample + Int64($0.samples.count)) })
        for item in detected {
            let range = item.segment.startSample..<(item.segment.startSample + Int64(item.segment.samples.count))
            #expect(range.clamped(to: item.speech) == item.speech)
            #expect(range.count <= item.speech.count + 2 * 6400)
        }
    }

    /// A finished session's detector serves the next one (issue 10: loading a new one took ~50 ms
    /// of every `earshot transcribe`): after `reset()` it segments exactly as a new detector does,
    /// also when the previous stream stopped in the middle of speech.
    @Test(.enabled(if: SherpaFixture.vadAvailable, SherpaFixture.vadMissing))
    func aResetDetectorSegmentsExactlyAsANewOne() throws {
        let (samples, _) = try SherpaFixture.concatenation(longerThan: 20, silence: 1)
        let fresh = try Self.detect(samples, .transcription)
        let reused = try SileroDetector(configuration: .transcription)
        try reused.accept(Array(samples.prefix(5 * 16000 + 123)))
        #expect(reused.isSpeech, "the first stream stops inside speech")
        try reused.reset()
        #expect(reused.samplesAccepted == 0 && reused.retainedSamples == 0 && !reused.isSpeech)
        let again = try Self.detect(samples, with: reused)
        #expect(fresh.count >= 3)
        #expect(again == fresh, "fresh: \(Self.describe(fresh)); reused: \(Self.describe(again))")
    }

    /// The engine process gets up to ten 0.1 s steps per call, one where a forced cut may be due:
    /// fed 1 s at a time (batched) the detector must cut exactly where it does fed one step at a
    /// time, forced cuts and sherpa-onnx's own splits included.
    @Test(.enabled(if: SherpaFixture.vadAvailable, SherpaFixture.vadMissing))
    func batchedStepsSegmentExactlyAsSingleSteps() throws {
        let (continuous, _) = try SherpaFixture.concatenation(longerThan: 45, silence: 0)
        let (paused, _) = try SherpaFixture.concatenation(longerThan: 30, silence: 1)
        let tight = SileroDetector.Configuration(minSilenceDuration: 1, maxSpeechDuration: 5, hardLimit: 7, speechPadding: 0.4)
        for (samples, configuration) in [(continuous, tight), (continuous, .transcription), (paused, .transcription)] {
            let single = try Self.detect(samples, configuration, chunk: 1600) // one 0.1 s step per call
            let batched = try Self.detect(samples, configuration, chunk: 16000)
            #expect(single.count >= 2, "more than one segment, so there are cuts to compare")
            #expect(batched == single, "single: \(Self.describe(single)); batched: \(Self.describe(batched))")
        }
    }

    @Test(.enabled(if: SherpaFixture.vadAvailable, SherpaFixture.vadMissing))
    func longSpeechIsSplitWithoutDroppingAudio() throws {
        // ~46 s of continuous reading: the utterances back to back, no pause reaching the minimum
        // silence, so every split is a length split. Left alone, sherpa-onnx 2.0.1 splits this
        // (max_speech_duration 20) at 21.37 s and starts the next segment at 21.76 s, dropping
        // 0.39 s (the next utterance's first word); with max 5 s it makes segments of up to 9.9 s,
        // each 0.26–0.39 s apart. Tight limits (5 s, hard 7 s) exercise the forced cut; the
        // defaults exercise sherpa-onnx's own split.
        let (samples, _) = try SherpaFixture.concatenation(longerThan: 45, silence: 0)
        let configuration = SileroDetector.Configuration(minSilenceDuration: 1, maxSpeechDuration: 5, hardLimit: 7)
        for chunk in [777, 16000] {
            let segments = try Self.detect(samples, configuration, chunk: chunk)
            print("continuous speech, limits 5/7 s, chunks of \(chunk): \(Self.describe(segments))")
            #expect(segments.count >= 7)
            for segment in segments {
                #expect(segment.samples.count <= 7 * 16000 + 1600)
                let start = Int(segment.startSample)
                #expect(Array(samples[start..<(start + segment.samples.count)]) == segment.samples)
            }
            for (previous, next) in zip(segments, segments.dropFirst()) {
                #expect(previous.startSample + Int64(previous.samples.count) == next.startSample, "audio dropped between segments")
            }
            let first = try #require(segments.first)
            #expect(first.startSample < 16000)
            #expect(Int(segments.last!.startSample) + segments.last!.samples.count == samples.count)
        }
        // The defaults keep ~50 s of continuous speech in pieces Whisper decodes whole.
        let segments = try Self.detect(samples, SileroDetector.Configuration())
        print("continuous speech, default limits: \(Self.describe(segments))")
        #expect(segments.count >= 2)
        #expect(segments.allSatisfy { Double($0.samples.count) / 16000 <= WhisperModel.maximumDuration })
        for (previous, next) in zip(segments, segments.dropFirst()) where previous.samples.count > 19 * 16000 {
            #expect(previous.startSample + Int64(previous.samples.count) == next.startSample, "audio dropped after a length split")
        }
    }

    @Test(.enabled(if: SherpaFixture.vadAvailable, SherpaFixture.vadMissing))
    func higherSensitivityFindsMoreQuietSpeech() throws {
        let (loud, _) = try SherpaFixture.concatenation(longerThan: 20, silence: 1)
        let quiet = loud.map { $0 * SherpaFixture.quietScale }
        var detected: [VoiceSensitivity: Int] = [:]
        for sensitivity in VoiceSensitivity.allCases {
            let segments = try Self.detect(quiet, SileroDetector.Configuration(sensitivity: sensitivity))
            detected[sensitivity] = segments.reduce(0) { $0 + $1.samples.count }
        }
        print("speech found in audio scaled by \(SherpaFixture.quietScale): " + VoiceSensitivity.allCases.map { "\($0.rawValue) \(String(format: "%.1f", Double(detected[$0]!) / 16000)) s" }.joined(separator: ", "))
        #expect(detected[.low]! <= detected[.medium]!)
        #expect(detected[.medium]! <= detected[.high]!)
        #expect(detected[.low]! < detected[.high]!)
        #expect(VoiceSensitivity.low.threshold > VoiceSensitivity.medium.threshold)
        #expect(VoiceSensitivity.medium.threshold > VoiceSensitivity.high.threshold)
    }
}
