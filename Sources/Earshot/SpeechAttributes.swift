import EarshotWire
import Foundation

/// Exact media time, as Apple's CoreMedia `CMTime` (value / timescale seconds).
public typealias CMTime = WireTime
/// A start and duration, as `CMTimeRange`.
public typealias CMTimeRange = WireTimeRange

/// The attributes transcription results carry on their text runs.
extension AttributeScopes {
    public struct SpeechAttributes: AttributeScope {
        /// The audio time range of a run (when `audioTimeRange` was asked for).
        public let audioTimeRange: AudioTimeRangeAttribute
        /// The confidence in [0, 1] of a run (when `transcriptionConfidence` was asked for).
        public let transcriptionConfidence: TranscriptionConfidenceAttribute
        public let foundation: FoundationAttributes
    }

    public var speech: SpeechAttributes.Type { SpeechAttributes.self }
}

/// `text.runs[\.audioTimeRange]`-style access.
extension AttributeDynamicLookup {
    public subscript<T: AttributedStringKey>(dynamicMember keyPath: KeyPath<AttributeScopes.SpeechAttributes, T>) -> T {
        self[T.self]
    }
}

public enum AudioTimeRangeAttribute: AttributedStringKey {
    public typealias Value = CMTimeRange
    public static let name = "earshot.audioTimeRange"
}

public enum TranscriptionConfidenceAttribute: AttributedStringKey {
    public typealias Value = Double
    public static let name = "earshot.transcriptionConfidence"
}

extension AnalyzerResult {
    /// The text as an attributed string with time-range and confidence attributes on its runs.
    var attributedText: AttributedString {
        var text = AttributedString()
        for run in runs {
            var piece = AttributedString(run.text)
            if let range = run.range { piece[AudioTimeRangeAttribute.self] = range }
            if let confidence = run.confidence { piece[TranscriptionConfidenceAttribute.self] = confidence }
            text += piece
        }
        return text
    }
}
