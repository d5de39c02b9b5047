import EarshotWire
import Foundation
import Testing
import TestSupport

/// Real speech through the real daemon and real models: word error rate of the LibriVox utterances
/// with each engine (`earshot transcribe`), and a recording longer than a minute transcribed
/// completely, with VAD segments on the speech and the daemon's memory bounded.
@Suite(.serialized, .speechDaemon())
struct SpeechAccuracyTests {
    /// WER ceilings: measured through the daemon plus a margin of a few words (71 reference words).
    /// Dictation measured 26.8 % (PocketSphinx decoding each padded VAD segment whole), Whisper
    /// 7.0 %, the long recording with Whisper 5.2 %.
    static let dictationCeiling = 0.32
    static let whisperCeiling = 0.12
    static let longWhisperCeiling = 0.12
    /// Bounds for the daemon's resident memory while it transcribes the long recording.
    static let residentCeiling = 512 << 20
    static let residentGrowthCeiling = 48 << 20

    /// Words each utterance must yield, in order (robust for both engines).
    static let keyWords: [[String]] = [["john", "consider", "power"], ["young", "man"], ["cold", "selfish"], ["married", "respectable"], ["even", "made"]]

    struct Document: Decodable {
        var file: String
        var text: String
    }

    /// `earshot transcribe --module MODULE --json` on the five utterances, one document per file.
    static func transcribe(module: String) async throws -> [String: String] {
        let daemon = try SpeechDaemon.shared()
        let files = SpeechFixtures.ids.map(SpeechFixtures.path)
        let run = try await ChildProcess.run(BuiltProducts.path("earshot"), ["--socket", daemon.socket, "transcribe", "--module", module, "--locale", "en-US", "--json"] + files,
                                             in: daemon.directory, timeout: .seconds(120))
        try #require(run.status == 0, "earshot transcribe failed: \(run.stderr)")
        // Pretty-printed documents, one after the other: each ends with a lone "}".
        var documents: [String: String] = [:]
        var current = ""
        for line in run.stdout.split(separator: "\n", omittingEmptySubsequences: false) {
            current += line + "\n"
            if line == "}" {
                let document = try JSONDecoder().decode(Document.self, from: Data(current.utf8))
                documents[(document.file as NSString).lastPathComponent.replacingOccurrences(of: ".wav", with: "")] = document.text
                current = ""
            }
        }
        try #require(documents.count == files.count, "expected \(files.count) JSON documents, got: \(run.stdout)")
        return documents
    }

    static func score(_ engine: String, _ documents: [String: String], ceiling: Double) throws {
        var pairs: [(reference: String, hypothesis: String)] = []
        for (id, keys) in zip(SpeechFixtures.ids, keyWords) {
            let hypothesis = try #require(documents[id])
            pairs.append((try SpeechFixtures.reference(id), hypothesis))
            print("[\(engine)] \(id.suffix(4)): \(hypothesis)")
            let order = SpeechFixtures.inOrder(keys, in: SpeechFixtures.words(hypothesis))
            #expect(order.ok, "\(engine) lost '\(order.missing ?? "")' in \(id): \(hypothesis)")
        }
        let wer = SpeechFixtures.wer(pairs)
        print("[\(engine)] WER on the five LibriVox utterances: \(String(format: "%.1f", wer * 100)) % (ceiling \(Int(ceiling * 100)) %)")
        #expect(wer <= ceiling, "\(engine) WER \(wer) is above the ceiling \(ceiling)")
    }

    @Test func dictationTranscribesTheLibriVoxUtterances() async throws {
        try Self.score("dictation/pocketsphinx", try await Self.transcribe(module: "dictation"), ceiling: Self.dictationCeiling)
    }

    @Test(.enabled(if: SpeechFixtures.whisperAvailable, SpeechFixtures.whisperMissing))
    func whisperTranscribesTheLibriVoxUtterances() async throws {
        try Self.score("transcriber/whisper", try await Self.transcribe(module: "transcriber"), ceiling: Self.whisperCeiling)
    }

    /// 3 × the five utterances with 1 s of silence after each (~90 s) through a Whisper session with
    /// a reporting detector: every utterance's key words in order, WER under the ceiling, speech
    /// ranges on the utterances and silence in the gaps, resident memory flat.
    @Test(.enabled(if: SpeechFixtures.whisperAvailable, SpeechFixtures.whisperMissing))
    func longRecordingIsTranscribedCompletelyInBoundedMemory() async throws {
        let daemon = try SpeechDaemon.shared()
        let directory = try TempDirectory("eslong")
        defer { directory.remove() }
        let repeats = 3
        let (path, reference) = try await SpeechFixtures.longRecording(in: directory, repeats: repeats)
        let samples = try SpeechFixtures.samples(path: path)
        #expect(samples.count > 60 * SpeechFixtures.rate, "the recording must be longer than 60 s")

        // Where each utterance's speech is (first to last loud 10 ms frame) and where the gaps are.
        var utterances: [(start: Int, end: Int)] = []
        var gaps: [(start: Int, end: Int)] = []
        var offset = 0
        for _ in 0..<repeats {
            for id in SpeechFixtures.ids {
                let clip = try SpeechFixtures.samples(id)
                let end = SpeechFixtures.endOfSpeech(clip)
                let start = clip.count - SpeechFixtures.endOfSpeech(Array(clip.reversed()))
                utterances.append((offset + start, offset + end))
                gaps.append((offset + clip.count, offset + clip.count + SpeechFixtures.rate))
                offset += clip.count + SpeechFixtures.rate
            }
        }
        #expect(offset == samples.count)

        let client = try TestConnection(daemon.socket)
        let monitor = try TestConnection(daemon.socket)
        defer { client.close(); monitor.close() }
        let detector = ModuleConfiguration(kind: .detector, locale: nil, reportingOptions: ["reportResults"], sensitivity: "medium")
        var session = try await WireSession.opened(client, [SpeechFixtures.transcriber(), detector])
        var resident: [Int] = []
        let slice = 10 * SpeechFixtures.rate
        let began = ContinuousClock.now
        for start in stride(from: 0, to: samples.count, by: slice) {
            try await session.send(samples[start..<min(start + slice, samples.count)])
            resident.append(try await monitor.stats().residentBytes)
        }
        let done = try await session.finish()
        let elapsed = ContinuousClock.now - began
        resident.append(try await monitor.stats().residentBytes)
        #expect(session.finished?.error == nil)
        #expect(done.lastSampleTime == SpeechFixtures.time(samples: samples.count))

        let hypothesis = session.finalText(module: 0)
        let words = SpeechFixtures.words(hypothesis)
        let keys = Array(repeating: Self.keyWords.flatMap { $0 }, count: repeats).flatMap { $0 }
        let order = SpeechFixtures.inOrder(keys, in: words)
        #expect(order.ok, "missing '\(order.missing ?? "")' (in order) from: \(hypothesis)")
        let wer = SpeechFixtures.wer([(reference, hypothesis)])
        let mib = resident.map { $0 >> 20 }
        print("[long] \(samples.count / SpeechFixtures.rate) s in \(elapsed), \(session.finals(module: 0).count) final results, WER \(String(format: "%.1f", wer * 100)) %, resident MiB per 10 s: \(mib)")
        #expect(wer <= Self.longWhisperCeiling)
        #expect(resident.max()! < Self.residentCeiling, "resident memory peaked at \(mib.max()!) MiB")
        // After the first 30 s everything is loaded and warm: streaming the rest must not keep
        // growing it (the last sample, after finish, is only held to the peak bound).
        let settled = resident.dropLast()[3...]
        #expect(settled.max()! - settled.min()! < Self.residentGrowthCeiling, "resident memory grew: \(mib) MiB")

        // Final transcriptions sit on the timeline in order, inside the recording.
        let finals = session.finals(module: 0)
        #expect(zip(finals, finals.dropFirst()).allSatisfy { $0.range.end <= $1.range.start })
        #expect(finals.allSatisfy { $0.range.end <= SpeechFixtures.time(samples: samples.count) })

        // The detector: speech and no-speech ranges tile the timeline; speech covers each utterance
        // and none reaches the middle of a gap.
        let detections = session.finals(module: 1)
        #expect(detections.allSatisfy { $0.speechDetected != nil })
        #expect(zip(detections, detections.dropFirst()).allSatisfy { $0.range.end == $1.range.start }, "detector ranges must tile the timeline")
        #expect(detections.first?.range.start == .zero)
        #expect(detections.last?.range.end == SpeechFixtures.time(samples: samples.count))
        let speech = detections.filter { $0.speechDetected == true }.map {
            (Int($0.range.start.converted(to: 16000).value), Int($0.range.end.converted(to: 16000).value))
        }
        print("[long] silero VAD: \(speech.count) speech ranges for \(utterances.count) utterances")
        for (index, utterance) in utterances.enumerated() {
            let covered = speech.reduce(0) { $0 + max(0, min($1.1, utterance.end) - max($1.0, utterance.start)) }
            #expect(Double(covered) >= 0.9 * Double(utterance.end - utterance.start), "utterance \(index) is only \(covered) of \(utterance.end - utterance.start) samples speech")
        }
        for (index, gap) in gaps.enumerated() {
            let middle = (gap.start + gap.end) / 2
            #expect(!speech.contains { $0.0 <= middle && middle < $0.1 }, "the middle of gap \(index) (\(Double(middle) / 16000) s) is marked as speech")
        }
    }
}
