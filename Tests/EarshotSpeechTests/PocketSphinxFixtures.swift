import EarshotAudio
import EarshotSpeech
import Foundation
import Testing
import TestSupport

/// Debian's pocketsphinx-en-us model and pocketsphinx-testdata recordings.
enum PocketSphinxFixtures {
    static let modelDirectory = "/usr/share/pocketsphinx/model/en-us"
    static let acousticModel = modelDirectory + "/en-us"
    static let languageModel = modelDirectory + "/en-us.lm.bin"
    static let dictionary = modelDirectory + "/cmudict-en-us.dict"
    static let librivoxDirectory = "/usr/share/pocketsphinx/test/data/librivox"
    static let goForwardPath = "/usr/share/pocketsphinx/test/data/goforward.raw"

    static var available: Bool {
        FileManager.default.fileExists(atPath: acousticModel + "/mdef")
            && FileManager.default.fileExists(atPath: librivoxDirectory + "/transcription")
    }

    static func model(_ options: PocketSphinxModel.Options = .init()) throws -> PocketSphinxModel {
        try PocketSphinxModel(acousticModel: acousticModel, languageModel: languageModel, dictionary: dictionary, options: options)
    }

    /// A LibriVox utterance as 16 kHz mono Float32.
    static func librivox(_ id: String) throws -> [Float] {
        let reader = try AudioFileReader(path: "\(librivoxDirectory)/\(id).wav")
        guard reader.sampleRate == PocketSphinxModel.sampleRate, reader.channels == 1 else {
            throw AudioError.unsupportedFormat("\(id): \(reader.channels) channels at \(reader.sampleRate) Hz")
        }
        return try reader.readAll()
    }

    /// "go forward ten meters", 16 kHz s16le mono.
    static func goForward() throws -> [Float] {
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: goForwardPath)))
        return try PCM.floats(fromLittleEndian: bytes, width: 2)
    }
}

/// The PocketSphinx error `body` throws, if any (checked on the test's side of `onPocketSphinxThread`).
func pocketSphinxError(_ body: () throws -> some Any) -> PocketSphinxError? {
    do {
        _ = try body()
        return nil
    } catch let error as PocketSphinxError {
        return error
    } catch {
        return nil
    }
}

/// Runs blocking decoder work on its own thread, as the daemon must (never the cooperative pool).
func onPocketSphinxThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try work() }) }
        thread.name = "pocketsphinx-test"
        thread.start()
    }
}

/// The five LibriVox utterances decoded once (streamed in 100 ms chunks, and whole), shared by
/// the tests that check accuracy, times, confidences and alternatives.
struct PocketSphinxLibrivoxRun: Sendable {
    var id: String
    var reference: String
    var duration: Double
    var streamed: Transcription
    var whole: Transcription
    var streamedSeconds: Double
    var wholeSeconds: Double
}

actor PocketSphinxLibrivoxRuns {
    static let shared = PocketSphinxLibrivoxRuns()
    static let alternatives = 5
    private var task: Task<[PocketSphinxLibrivoxRun], any Error>?

    func get() async throws -> [PocketSphinxLibrivoxRun] {
        if task == nil { task = Task { try await onPocketSphinxThread(Self.decodeAll) } }
        return try await task!.value
    }

    private static func decodeAll() throws -> [PocketSphinxLibrivoxRun] {
        let references = try WordErrorRate.librivoxReferences()
        let decoder = try PocketSphinxDecoder(model: PocketSphinxFixtures.model())
        var runs: [PocketSphinxLibrivoxRun] = []
        for id in references.keys.sorted() {
            let samples = try PocketSphinxFixtures.librivox(id)
            var clock = ContinuousClock.now
            try decoder.startUtterance()
            for start in stride(from: 0, to: samples.count, by: 1600) {
                try decoder.process(samples[start..<min(start + 1600, samples.count)])
            }
            let streamed = try decoder.endUtterance(alternatives: alternatives)
            let streamedSeconds = seconds(ContinuousClock.now - clock)
            clock = .now
            let whole = try decoder.decodeUtterance(samples, alternatives: alternatives)
            let wholeSeconds = seconds(ContinuousClock.now - clock)
            runs.append(PocketSphinxLibrivoxRun(
                id: id, reference: references[id]!, duration: Double(samples.count) / Double(PocketSphinxModel.sampleRate),
                streamed: streamed, whole: whole, streamedSeconds: streamedSeconds, wholeSeconds: wholeSeconds))
        }
        return runs
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
