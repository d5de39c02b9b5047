import EarshotWire
import Foundation

/// A transcription module's result: an assertion about a range of audio (Apple's
/// `SpeechTranscriber.Result` / `DictationTranscriber.Result`). Volatile results for a range are
/// replaced by later ones; a final result is not.
public struct TranscriptionResult: Sendable, Hashable, CustomStringConvertible {
    /// The most likely interpretation, with `audioTimeRange`/`transcriptionConfidence` on its runs
    /// when those attributes were asked for.
    public let text: AttributedString
    /// Other interpretations, most likely first.
    public let alternatives: [AttributedString]
    /// The audio this result is about.
    public let range: CMTimeRange
    /// Results from this module are final up to, not including, this time.
    public let resultsFinalizationTime: CMTime
    /// Whether this result is final.
    public let isFinal: Bool
    /// The language spoken in this range: the one the engine identified for a module whose locale
    /// is `und`, else the module's (nil when the engine does not say). Earshot extension.
    public let language: Locale?

    init(_ result: AnalyzerResult) {
        text = result.attributedText
        alternatives = result.alternatives.map(AttributedString.init)
        range = result.range
        resultsFinalizationTime = result.finalizationTime
        isFinal = result.isFinal
        language = result.language.map { Locale(identifier: $0) }
    }

    public var description: String { "\(isFinal ? "final" : "volatile") \(range): \(String(text.characters))" }
}

/// A speech detector's result: whether a range holds speech (only with `reportResults`).
public struct DetectionResult: Sendable, Hashable {
    public let range: CMTimeRange
    public let resultsFinalizationTime: CMTime
    public let speechDetected: Bool
    public var isFinal: Bool { true }

    init(_ result: AnalyzerResult) {
        range = result.range
        resultsFinalizationTime = result.finalizationTime
        speechDetected = result.speechDetected ?? false
    }
}

/// The results of one module for one analyzer: an AsyncSequence that ends when the session
/// finishes (throwing the session's error, if any).
public struct ModuleResults<Result: Sendable>: AsyncSequence, Sendable {
    public typealias Element = Result
    let stream: AsyncThrowingStream<Result, any Error>
    public func makeAsyncIterator() -> AsyncThrowingStream<Result, any Error>.AsyncIterator { stream.makeAsyncIterator() }
}

/// Where an analyzer delivers a module's results.
final class ResultChannel<Result: Sendable>: Sendable {
    let stream: AsyncThrowingStream<Result, any Error>
    private let continuation: AsyncThrowingStream<Result, any Error>.Continuation

    init() {
        (stream, continuation) = AsyncThrowingStream.makeStream(of: Result.self, throwing: (any Error).self)
    }

    func yield(_ result: Result) { continuation.yield(result) }
    func finish(_ error: (any Error)?) { continuation.finish(throwing: error) }
}

/// Modules the analyzer hands results to.
protocol ResultReceiving: Sendable {
    func receive(_ result: AnalyzerResult)
    func finishResults(_ error: (any Error)?)
}
