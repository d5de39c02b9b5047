import EarshotWire
import Foundation

/// The attributes transcription results carry on their text runs (Apple's Speech attribute scope).
extension AttributeScopes {
    public struct SpeechAttributes: AttributeScope {
        /// The time range in the source audio of a run (when `audioTimeRange` was asked for).
        public let audioTimeRange: TimeRangeAttribute
        /// The confidence in [0, 1] of a run (when `transcriptionConfidence` was asked for).
        public let transcriptionConfidence: ConfidenceAttribute
        public let foundation: FoundationAttributes

        /// The time range in the source audio corresponding to the associated text.
        public enum TimeRangeAttribute: AttributedStringKey {
            public typealias Value = CMTimeRange
            public static let name = "earshot.audioTimeRange"
        }

        /// A confidence level (0–1) of the associated text.
        public enum ConfidenceAttribute: AttributedStringKey {
            public typealias Value = Double
            public static let name = "earshot.transcriptionConfidence"
        }
    }

    public var speech: SpeechAttributes.Type { SpeechAttributes.self }
}

/// `run.audioTimeRange`-style access.
extension AttributeDynamicLookup {
    public subscript<T: AttributedStringKey>(dynamicMember keyPath: KeyPath<AttributeScopes.SpeechAttributes, T>) -> T {
        self[T.self]
    }
}

extension AttributedString {
    /// The range of this string whose runs' audio time ranges intersect `timeRange` (from the first
    /// such run to the last), or nil when none does — also when the runs carry no time ranges.
    public func rangeOfAudioTimeRangeAttributes(intersecting timeRange: CMTimeRange) -> Range<AttributedString.Index>? {
        var lower: AttributedString.Index?
        var upper: AttributedString.Index?
        for (range, runRange) in runs[\.audioTimeRange] {
            guard let range, range.start < timeRange.end, timeRange.start < range.end || (range.isEmpty && timeRange.containsTime(range.start)) else { continue }
            if lower == nil { lower = runRange.lowerBound }
            upper = runRange.upperBound
        }
        guard let lower, let upper else { return nil }
        return lower..<upper
    }
}

extension AnalyzerResult {
    /// The text as an attributed string with time-range and confidence attributes on its runs.
    var attributedText: AttributedString {
        var text = AttributedString()
        for run in runs {
            var piece = AttributedString(run.text)
            if let range = run.range { piece.audioTimeRange = CMTimeRange(range) }
            if let confidence = run.confidence { piece.transcriptionConfidence = confidence }
            text += piece
        }
        return text
    }
}
