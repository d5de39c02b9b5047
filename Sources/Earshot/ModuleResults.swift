import EarshotWire
import Foundation

/// What every module's results have (Apple's `SpeechModuleResult`).
public protocol SpeechModuleResult {
    /// The audio input range this result applies to.
    var range: CMTimeRange { get }
    /// Results from this module are final up to, not including, this time (after this result).
    var resultsFinalizationTime: CMTime { get }
    /// Whether this result is final at the time it is produced. (A requirement with a default here,
    /// where Apple has only the extension, so the daemon's own verdict reaches generic code.)
    var isFinal: Bool { get }
}

extension SpeechModuleResult {
    /// Final when results are final through the end of its range.
    public var isFinal: Bool { resultsFinalizationTime >= range.end }
}

/// A transcription module's result: an assertion about a range of audio. Volatile results for a
/// range are replaced by later ones; a final result is not. `Module` tells the two transcribers'
/// results apart: use it as `SpeechTranscriber.Result` or `DictationTranscriber.Result`.
public struct TranscriptionResult<Module: SpeechModule>: SpeechModuleResult, Sendable, Hashable, CustomStringConvertible {
    /// The most likely interpretation, with `audioTimeRange`/`transcriptionConfidence` on its runs
    /// when those attributes were asked for.
    public var text: AttributedString
    /// Other interpretations, most likely first.
    public let alternatives: [AttributedString]
    public let range: CMTimeRange
    public let resultsFinalizationTime: CMTime
    /// The language spoken in this range: the one the engine identified for a module whose locale
    /// is `und`, else the module's (nil when the engine does not say). Earshot extension.
    public let language: Locale?
    /// True when the range holds speech (the daemon's detector found it) that the engine gave no
    /// text for, even decoded again: speech lost, not silence. Earshot extension.
    public let speechWithoutText: Bool
    /// How sure Whisper's decoder was of this final result: average token log probability,
    /// no-speech probability, compression ratio, temperature, tokens. Earshot extension; nil for
    /// other engines and volatile results.
    public let decoding: DecodeReport?
    /// The daemon's finality, which can differ from the time comparison at a segment's edge.
    private let final: Bool

    init(_ result: AnalyzerResult) {
        text = result.attributedText
        alternatives = result.alternatives.map(AttributedString.init)
        range = CMTimeRange(result.range)
        resultsFinalizationTime = CMTime(result.finalizationTime)
        final = result.isFinal
        language = result.language.map { Locale(identifier: $0) }
        speechWithoutText = result.speechWithoutText ?? false
        decoding = result.decoding
    }

    /// Whether this result is final.
    public var isFinal: Bool { final }

    public var description: String { "\(isFinal ? "final" : "volatile") \(range): \(String(text.characters))" }
}

/// A speech detector's result: whether a range holds speech (only with `reportResults`).
public struct DetectionResult: SpeechModuleResult, Sendable, Hashable {
    public let range: CMTimeRange
    public let resultsFinalizationTime: CMTime
    public let speechDetected: Bool
    public var isFinal: Bool { true }

    init(_ result: AnalyzerResult) {
        range = CMTimeRange(result.range)
        resultsFinalizationTime = CMTime(result.finalizationTime)
        speechDetected = result.speechDetected ?? false
    }
}

/// The results of one module for one analyzer: an AsyncSequence that ends when the session
/// finishes (throwing the session's error, if any).
public struct ModuleResults<Result: Sendable>: AsyncSequence, Sendable {
    public typealias Element = Result
    public typealias Failure = any Error
    let stream: AsyncThrowingStream<Result, any Error>
    public func makeAsyncIterator() -> AsyncThrowingStream<Result, any Error>.AsyncIterator { stream.makeAsyncIterator() }
}

/// Where an analyzer delivers a module's results (and what its engine does not honour).
final class ResultChannel<Result: Sendable>: Sendable {
    let stream: AsyncThrowingStream<Result, any Error>
    private let continuation: AsyncThrowingStream<Result, any Error>.Continuation
    private let unhonoredBox = UnhonoredBox()
    /// The daemon's latest report for this module.
    var unhonored: [UnhonoredRequest] {
        get { unhonoredBox.value }
        set { unhonoredBox.value = newValue }
    }

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
    /// The daemon's report of what this module asks for that its engine does not do.
    func noteUnhonored(_ requests: [UnhonoredRequest])
    /// The report last noted.
    var unhonored: [UnhonoredRequest] { get }
}

/// Something a module asked for that the daemon's engine does not do (Earshot extension; see
/// `SpeechTranscriber.unhonoredRequests`).
public typealias UnhonoredRequest = EarshotWire.UnhonoredRequest
/// Whisper's measures of a final result (Earshot extension; ``TranscriptionResult/decoding``).
public typealias DecodeReport = EarshotWire.DecodeReport

/// A lock-protected report.
final class UnhonoredBox: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [UnhonoredRequest] = []
    var value: [UnhonoredRequest] {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}
