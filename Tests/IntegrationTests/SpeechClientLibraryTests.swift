import Earshot
import EarshotWire
import EarshotAudio
import Foundation
import Testing
import TestSupport

/// The Apple-shaped client library (`Earshot`) against the real daemon: `SpeechAnalyzer` with
/// `analyzeSequence`, the finish methods, and results streams that end. Serialized: the tests point
/// the process-wide `EarshotService.shared` at the suite's daemon.
@Suite(.serialized, .speechDaemon())
struct SpeechClientLibraryTests {
    static let locale = Locale(identifier: "en-US")
    static let format = AVAudioFormat(commonFormat: .pcmFormatInt16, sampleRate: 16000, channels: 1, interleaved: true)!

    static func configure() async throws -> TestDaemon {
        let daemon = try SpeechDaemon.shared()
        await EarshotService.shared.configure(appID: "com.example.speech-client-tests", socket: daemon.socket)
        return daemon
    }

    /// Utterance `id` read with `AudioFileReader`, in buffers of `chunk` frames, each with its
    /// explicit start time when `timed`; and the number of samples.
    static func inputs(_ id: String, chunk: Int = 3_999, timed: Bool) throws -> (stream: AsyncStream<AnalyzerInput>, samples: Int) {
        let reader = try AudioFileReader(path: SpeechFixtures.path(id))
        var inputs: [AnalyzerInput] = []
        var offset = 0
        while true {
            let samples = try reader.read(frames: chunk)
            if samples.isEmpty { break }
            inputs.append(AnalyzerInput(buffer: AVAudioPCMBuffer(format: format, interleavedSamples: samples)!,
                                        bufferStartTime: timed ? CMTime(value: Int64(offset), timescale: 16000) : nil))
            offset += samples.count
        }
        let stream = AsyncStream<AnalyzerInput> { continuation in
            for input in inputs { continuation.yield(input) }
            continuation.finish()
        }
        return (stream, offset)
    }

    /// Every result of `results` until the stream ends (fails after `timeout`: a hang).
    static func collect<M>(_ results: ModuleResults<TranscriptionResult<M>>, timeout: Duration = .seconds(60)) async throws -> [TranscriptionResult<M>] {
        try await withThrowingTaskGroup(of: [TranscriptionResult<M>]?.self) { group in
            group.addTask {
                var all: [TranscriptionResult<M>] = []
                for try await result in results { all.append(result) }
                return all
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            let first = try await group.next()!
            group.cancelAll()
            return try #require(first, "the results stream did not end within \(timeout)")
        }
    }

    static func text<M>(_ results: [TranscriptionResult<M>]) -> String {
        results.filter(\.isFinal).map { String($0.text.characters) }.joined(separator: " ")
    }

    static func modules() -> [String] { SpeechFixtures.whisperAvailable ? ["transcriber", "dictation"] : ["dictation"] }

    /// analyzeSequence (explicit buffer start times) beside a task reading results; then
    /// finalizeAndFinish(through: last sample time): the last word is there and results end.
    @Test(arguments: modules())
    func analyzeSequenceThenFinalizeAndFinish(kind: String) async throws {
        _ = try await Self.configure()
        let id = SpeechFixtures.ids[1]
        let (input, samples) = try Self.inputs(id, timed: true)
        if kind == "transcriber" {
            let transcriber = SpeechTranscriber(locale: Self.locale, transcriptionOptions: [], reportingOptions: [], attributeOptions: [.audioTimeRange])
            try await Self.analyze(input, samples: samples, with: transcriber, results: transcriber.results, kind: kind)
        } else {
            let dictation = DictationTranscriber(locale: Self.locale, contentHints: [], transcriptionOptions: [], reportingOptions: [],
                                                 attributeOptions: [.audioTimeRange, .transcriptionConfidence])
            try await Self.analyze(input, samples: samples, with: dictation, results: dictation.results, kind: kind)
        }
    }

    static func analyze<M: SpeechModule>(_ input: AsyncStream<AnalyzerInput>, samples: Int, with module: M, results: ModuleResults<TranscriptionResult<M>>, kind: String) async throws {
        let analyzer = SpeechAnalyzer(modules: [module])
        let (collected, last) = try await withThrowingTaskGroup(of: ([TranscriptionResult<M>]?, CMTime?).self) { group in
            group.addTask { (try await Self.collect(results), nil) }
            group.addTask {
                let last = try await analyzer.analyzeSequence(input)
                if let last { try await analyzer.finalizeAndFinish(through: last) }
                return (nil, last)
            }
            var collected: [TranscriptionResult<M>] = []
            var last: CMTime?
            for try await (results, time) in group {
                if let results { collected = results }
                if let time { last = time }
            }
            return (collected, last)
        }
        #expect(last == CMTime(value: Int64(samples), timescale: 16000), "analyzeSequence returns the time after the last sample")
        let text = Self.text(collected)
        print("[client \(kind)] \(text)")
        let words = SpeechFixtures.words(text)
        #expect(words.last == "man", "\(text)")
        #expect(SpeechFixtures.inOrder(["was", "young", "man"], in: words).ok)
        for result in collected where result.isFinal {
            #expect(result.range.end <= last!)
            for run in result.text.runs where !result.text[run.range].characters.isEmpty {
                let range = try #require(run.audioTimeRange, "audioTimeRange was asked for")
                #expect(range.start >= result.range.start && range.end <= result.range.end + CMTime(value: 1, timescale: 100))
            }
        }
        // The session is gone on the daemon too.
        let monitor = try TestConnection(try SpeechDaemon.shared().socket)
        defer { monitor.close() }
        #expect(try await monitor.pollStats { $0.sessions == 0 }.sessions == 0)
    }

    /// init(inputSequence:…) analyses on its own; finalizeAndFinishThroughEndOfInput() waits for
    /// the input to end, finalizes and finishes: no hang, the words are there, results end.
    @Test func autonomousAnalyzerFinishesThroughEndOfInput() async throws {
        _ = try await Self.configure()
        let (input, _) = try Self.inputs(SpeechFixtures.ids[4], timed: false)
        let dictation = DictationTranscriber(locale: Self.locale, preset: .longDictation)
        async let collected = Self.collect(dictation.results)
        let analyzer = SpeechAnalyzer(inputSequence: input, modules: [dictation])
        let began = ContinuousClock.now
        try await analyzer.finalizeAndFinishThroughEndOfInput()
        let results = try await collected
        #expect(ContinuousClock.now - began < .seconds(30))
        let text = Self.text(results)
        print("[client autonomous] \(text)")
        #expect(SpeechFixtures.inOrder(["might", "even", "made"], in: SpeechFixtures.words(text)).ok, "\(text)")
    }

    /// cancelAndFinishNow() on analyzers that never got audio: one that never reached the daemon and
    /// one whose session was opened by prepareToAnalyze. Both results streams end.
    @Test func cancelAndFinishNowWithoutAudioEndsResults() async throws {
        _ = try await Self.configure()
        let never = DictationTranscriber(locale: Self.locale, preset: .shortDictation)
        async let neverResults = Self.collect(never.results, timeout: .seconds(10))
        await SpeechAnalyzer(modules: [never]).cancelAndFinishNow()
        #expect(try await neverResults.isEmpty)

        let prepared = DictationTranscriber(locale: Self.locale, preset: .shortDictation)
        async let preparedResults = Self.collect(prepared.results, timeout: .seconds(10))
        let analyzer = SpeechAnalyzer(modules: [prepared])
        try await analyzer.prepareToAnalyze(in: nil)
        let monitor = try TestConnection(try SpeechDaemon.shared().socket)
        defer { monitor.close() }
        #expect(try await monitor.stats().sessions == 1)
        await analyzer.cancelAndFinishNow()
        #expect(try await preparedResults.allSatisfy { String($0.text.characters).isEmpty })
        #expect(try await monitor.pollStats { $0.sessions == 0 }.sessions == 0)
    }

    /// setModules during analysis: the removed module's results end, the new one analyses the audio
    /// that follows; setContext is accepted mid-session.
    @Test func setModulesAndContextDuringAnalysis() async throws {
        _ = try await Self.configure()
        let first = DictationTranscriber(locale: Self.locale, preset: .longDictation)
        let second = DictationTranscriber(locale: Self.locale, contentHints: [], transcriptionOptions: [], reportingOptions: [], attributeOptions: [.audioTimeRange])
        let analyzer = SpeechAnalyzer(modules: [first])
        async let firstResults = Self.collect(first.results)
        async let secondResults = Self.collect(second.results)
        let one = SpeechFixtures.ids[1], two = SpeechFixtures.ids[4]
        let silence = AnalyzerInput(buffer: AVAudioPCMBuffer(format: Self.format, interleavedSamples: [Float](repeating: 0, count: 16000))!)
        let (a, _) = try Self.inputs(one, timed: false)
        _ = try await analyzer.analyzeSequence(a)
        _ = try await analyzer.analyzeSequence(AsyncStream { $0.yield(silence); $0.finish() })
        try await analyzer.finalize(through: nil)
        try await analyzer.setModules([second])
        let context = AnalysisContext()
        context.contextualStrings = [.general: ["Dashwood", "Norland"]]
        try await analyzer.setContext(context)
        let (b, _) = try Self.inputs(two, timed: false)
        let last = try #require(try await analyzer.analyzeSequence(b))
        try await analyzer.finalizeAndFinish(through: last)
        let before = try await firstResults
        let after = try await secondResults
        #expect(before.contains { $0.isFinal })
        #expect(!after.isEmpty)
        // The second module only saw the second utterance, which starts after the first one ended.
        let finals = before.filter { $0.isFinal }
        let firstEnd = try #require(finals.last).range.end
        #expect(after.filter { $0.isFinal }.allSatisfy { $0.range.start >= firstEnd })
        #expect(Self.text(after).lowercased().contains("might even"))
    }

    /// SpeechModels.endRetention() unloads a lingering model at once.
    @Test func endRetentionUnloadsLingeringModels() async throws {
        let daemon = try await Self.configure()
        let dictation = DictationTranscriber(locale: Self.locale, preset: .shortDictation)
        let whisperOrDictation: any SpeechModule = SpeechFixtures.whisperAvailable
            ? SpeechTranscriber(locale: Self.locale, preset: .transcription) : dictation
        let analyzer = SpeechAnalyzer(modules: [whisperOrDictation], options: .init(priority: .medium, modelRetention: .lingering))
        let (input, _) = try Self.inputs(SpeechFixtures.ids[4], timed: false)
        let last = try #require(try await analyzer.analyzeSequence(input))
        try await analyzer.finalizeAndFinish(through: last)
        let connection = try TestConnection(daemon.socket)
        defer { connection.close() }
        let stats = try #require(try await connection.roundTrip(StatsRequest(id: "1"))).decode(StatsReply.self)
        if SpeechFixtures.whisperAvailable {
            #expect(stats.models.contains { $0.key.hasPrefix("whisper-base") && $0.users == 0 }, "a lingering model stays loaded")
        }
        await SpeechModels.endRetention()
        let after = try #require(try await connection.roundTrip(StatsRequest(id: "2"))).decode(StatsReply.self)
        #expect(after.models.isEmpty)
    }
}
