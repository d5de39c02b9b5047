import EarshotWire
import Foundation

/// A final transcript segment with its words, ready to print.
public struct TranscriptSegment: Codable, Sendable, Hashable {
    public struct Word: Codable, Sendable, Hashable {
        public var text: String
        public var start: Double?
        public var end: Double?
        public var confidence: Double?

        public init(text: String, start: Double?, end: Double?, confidence: Double?) {
            self.text = text
            self.start = start
            self.end = end
            self.confidence = confidence
        }
    }
    public var start: Double
    public var end: Double
    public var text: String
    public var words: [Word]
    /// BCP-47 language of the segment, when the engine reports one.
    public var language: String?
    /// True when the segment holds speech the engine gave no text for (absent otherwise).
    public var speechWithoutText: Bool?
    /// Whisper's measures of the segment's decode (absent for other engines).
    public var decoding: DecodeReport?

    public init(start: Double, end: Double, text: String, words: [Word] = [], language: String? = nil, speechWithoutText: Bool = false,
                decoding: DecodeReport? = nil) {
        self.start = start
        self.end = end
        self.text = text
        self.words = words
        self.language = language
        self.speechWithoutText = speechWithoutText ? true : nil
        self.decoding = decoding
    }

    enum CodingKeys: String, CodingKey { case start, end, text, words, language, speechWithoutText = "speech_without_text", decoding }
}

/// One subtitle cue.
public struct SubtitleCue: Sendable, Hashable {
    public var start: Double
    public var end: Double
    public var text: String
}

/// Transcript output: plain text, JSON, SubRip or WebVTT.
public enum TranscriptFormatter {
    public static func text(_ segments: [TranscriptSegment]) -> String {
        segments.map(\.text).filter { !$0.isEmpty }.joined(separator: " ")
    }

    /// The language most of the speech is in (by segment duration), if segments report one.
    public static func language(_ segments: [TranscriptSegment]) -> String? {
        var seconds: [String: Double] = [:]
        for segment in segments where !segment.text.isEmpty {
            if let language = segment.language { seconds[language, default: 0] += segment.end - segment.start }
        }
        return seconds.max { $0.value == $1.value ? $0.key > $1.key : $0.value < $1.value }?.key
    }

    /// The stretches of consecutive segments flagged `speech_without_text`, as (start, end) seconds.
    public static func speechWithoutText(_ segments: [TranscriptSegment]) -> [(start: Double, end: Double)] {
        var stretches: [(start: Double, end: Double)] = []
        var previousFlagged = false
        for segment in segments {
            let flagged = segment.speechWithoutText == true
            if flagged, previousFlagged { stretches[stretches.count - 1].end = segment.end } else if flagged { stretches.append((segment.start, segment.end)) }
            previousFlagged = flagged
        }
        return stretches
    }

    public static func srt(_ segments: [TranscriptSegment]) -> String {
        cues(segments).enumerated().map { index, cue in
            "\(index + 1)\n\(timestamp(cue.start, comma: true)) --> \(timestamp(cue.end, comma: true))\n\(cue.text)\n"
        }.joined(separator: "\n")
    }

    public static func vtt(_ segments: [TranscriptSegment]) -> String {
        "WEBVTT\n\n" + cues(segments).map { cue in
            "\(timestamp(cue.start, comma: false)) --> \(timestamp(cue.end, comma: false))\n\(cue.text)\n"
        }.joined(separator: "\n")
    }

    /// Subtitle cues cut on word times: a cue ends after a sentence-ending word once it is at least
    /// `minimumSeconds` long, or before a word that would make it longer than `maximumSeconds` or
    /// `maximumCharacters`. Segments without word times are one cue each.
    public static func cues(_ segments: [TranscriptSegment], maximumSeconds: Double = 6, minimumSeconds: Double = 1.5,
                            maximumCharacters: Int = 84) -> [SubtitleCue] {
        var cues: [SubtitleCue] = []
        for segment in segments where !segment.text.isEmpty {
            let timed = segment.words.compactMap { word -> (String, Double, Double)? in
                guard let start = word.start, let end = word.end else { return nil }
                return (word.text, start, end)
            }
            guard !timed.isEmpty, timed.count == segment.words.count else {
                cues.append(SubtitleCue(start: segment.start, end: segment.end, text: segment.text))
                continue
            }
            var current: SubtitleCue?
            for (text, start, end) in timed {
                if let cue = current, end - cue.start > maximumSeconds || cue.text.count + 1 + text.count > maximumCharacters {
                    cues.append(cue)
                    current = nil
                }
                if var cue = current {
                    cue.text += " " + text
                    cue.end = max(cue.end, end)
                    current = cue
                } else {
                    current = SubtitleCue(start: start, end: max(start, end), text: text)
                }
                if let cue = current, let last = text.last, ".?!。？！".contains(last), cue.end - cue.start >= minimumSeconds {
                    cues.append(cue)
                    current = nil
                }
            }
            if let cue = current { cues.append(cue) }
        }
        return cues
    }

    /// `HH:MM:SS,mmm` (SubRip) or `HH:MM:SS.mmm` (WebVTT).
    public static func timestamp(_ seconds: Double, comma: Bool) -> String {
        let millis = Int((max(seconds, 0) * 1000).rounded())
        let (h, m, s, ms) = (millis / 3_600_000, millis / 60_000 % 60, millis / 1000 % 60, millis % 1000)
        return String(format: "%02d:%02d:%02d%@%03d", h, m, s, comma ? "," : ".", ms)
    }
}

extension TranscriptSegment {
    /// The segment of a final analyzer result as the daemon sends it (word times from its runs).
    public init(_ result: AnalyzerResult) {
        // One run is the whole text (the engine gave no word times): no word list then.
        let words: [Word] = result.runs.count < 2 ? [] : result.runs.compactMap { run in
            let word = run.text.trimmingCharacters(in: .whitespaces)
            guard !word.isEmpty else { return nil }
            return Word(text: word, start: run.range?.start.seconds, end: run.range?.end.seconds, confidence: run.confidence)
        }
        self.init(start: result.range.start.seconds, end: result.range.end.seconds,
                  text: result.text.trimmingCharacters(in: .whitespaces), words: words, language: result.language,
                  speechWithoutText: result.speechWithoutText ?? false, decoding: result.decoding)
    }
}
