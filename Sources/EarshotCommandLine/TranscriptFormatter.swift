import Earshot
import EarshotWire
import Foundation

/// A final transcript segment with its words, ready to print.
public struct TranscriptSegment: Codable, Sendable, Hashable {
    public struct Word: Codable, Sendable, Hashable {
        public var text: String
        public var start: Double?
        public var end: Double?
        public var confidence: Double?
    }
    public var start: Double
    public var end: Double
    public var text: String
    public var words: [Word]

    /// The segment of a final transcription result (word times from its `audioTimeRange` runs).
    public init(_ result: TranscriptionResult) {
        start = result.range.start.seconds
        end = result.range.end.seconds
        text = String(result.text.characters).trimmingCharacters(in: .whitespaces)
        // One run is the whole text (the engine gave no word times): no word list then.
        let runs = Array(result.text.runs)
        words = runs.count < 2 ? [] : runs.compactMap { run in
            let word = String(result.text[run.range].characters).trimmingCharacters(in: .whitespaces)
            guard !word.isEmpty else { return nil }
            let range = run[AudioTimeRangeAttribute.self]
            return Word(text: word, start: range?.start.seconds, end: range?.end.seconds, confidence: run[TranscriptionConfidenceAttribute.self])
        }
    }

    public init(start: Double, end: Double, text: String, words: [Word] = []) {
        self.start = start
        self.end = end
        self.text = text
        self.words = words
    }
}

/// Transcript output: plain text, JSON, SubRip or WebVTT.
public enum TranscriptFormatter {
    public static func text(_ segments: [TranscriptSegment]) -> String {
        segments.map(\.text).filter { !$0.isEmpty }.joined(separator: " ")
    }

    public static func srt(_ segments: [TranscriptSegment]) -> String {
        segments.filter { !$0.text.isEmpty }.enumerated().map { index, segment in
            "\(index + 1)\n\(timestamp(segment.start, comma: true)) --> \(timestamp(segment.end, comma: true))\n\(segment.text)\n"
        }.joined(separator: "\n")
    }

    public static func vtt(_ segments: [TranscriptSegment]) -> String {
        "WEBVTT\n\n" + segments.filter { !$0.text.isEmpty }.map { segment in
            "\(timestamp(segment.start, comma: false)) --> \(timestamp(segment.end, comma: false))\n\(segment.text)\n"
        }.joined(separator: "\n")
    }

    /// `HH:MM:SS,mmm` (SubRip) or `HH:MM:SS.mmm` (WebVTT).
    public static func timestamp(_ seconds: Double, comma: Bool) -> String {
        let millis = Int((max(seconds, 0) * 1000).rounded())
        let (h, m, s, ms) = (millis / 3_600_000, millis / 60_000 % 60, millis / 1000 % 60, millis % 1000)
        return String(format: "%02d:%02d:%02d%@%03d", h, m, s, comma ? "," : ".", ms)
    }
}
