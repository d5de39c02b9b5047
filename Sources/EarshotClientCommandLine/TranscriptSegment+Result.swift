import Earshot
import EarshotCommandLine
import Foundation

extension TranscriptSegment {
    /// The segment of a final transcription result (word times from its `audioTimeRange` runs).
    public init<Module>(_ result: TranscriptionResult<Module>) {
        // One run is the whole text (the engine gave no word times): no word list then.
        let runs = Array(result.text.runs)
        let words: [Word] = runs.count < 2 ? [] : runs.compactMap { run in
            let word = String(result.text[run.range].characters).trimmingCharacters(in: .whitespaces)
            guard !word.isEmpty else { return nil }
            let range = run.audioTimeRange
            return Word(text: word, start: range?.start.seconds, end: range?.end.seconds, confidence: run.transcriptionConfidence)
        }
        self.init(start: result.range.start.seconds, end: result.range.end.seconds,
                  text: String(result.text.characters).trimmingCharacters(in: .whitespaces), words: words,
                  language: result.language?.identifier, speechWithoutText: result.speechWithoutText, decoding: result.decoding)
    }
}
