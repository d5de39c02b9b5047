import Foundation

/// Consecutive speech segments of a recording decoded as one Whisper window: Whisper is trained on
/// 30 s windows of running speech, and a window of several utterances gives each the others as
/// context and costs one decode (with its fixed tail padding) instead of one per utterance. The
/// samples are the segments back to back (their silence padding between them); the window's words
/// go back to the segment they were spoken in, so each segment still gets its own result.
struct SegmentGroup {
    /// One segment: its first VAD sample and its length; it starts `offset` samples into the window.
    struct Piece: Hashable {
        var start: Int64
        var count: Int
        var offset: Int
    }

    private(set) var pieces: [Piece] = []
    private(set) var samples: [Float] = []

    mutating func append(_ segment: SpeechSegment) {
        pieces.append(Piece(start: segment.startSample, count: segment.samples.count, offset: samples.count))
        samples += segment.samples
    }

    /// The same segments where they lie in the input, for a decode of the input from its first
    /// sample on (``RecordingSpeculation``); holds no samples.
    var inPlace: SegmentGroup {
        var placed = SegmentGroup()
        placed.pieces = pieces.map { Piece(start: $0.start, count: $0.count, offset: Int($0.start)) }
        return placed
    }

    /// Audio samples of the segments.
    var speechSamples: Int { pieces.reduce(0) { $0 + $1.count } }

    /// Each piece's share of `transcription` (times in seconds from the window's start, at
    /// `sampleRate`), in piece order, with times from the piece's own start. A piece gets the words
    /// that start in it, except that Whisper's word times run early, so a cut that falls just
    /// after a word with no punctuation moves back (up to two words) or forward (one) to the
    /// nearest word that ends a sentence or clause. A window decoded without word times cannot be
    /// split: then nil.
    func split(_ transcription: Transcription, sampleRate: Int) -> [Transcription]? {
        let rate = Double(sampleRate)
        if pieces.count == 1 {
            // The whole text; only the word times move when the piece starts later in the window.
            var whole = transcription
            let origin = Double(pieces[0].offset) / rate
            let duration = Double(pieces[0].count) / rate
            if origin > 0 { whole.words = Self.local(whole.words[...], origin: origin, duration: duration) }
            return [whole]
        }
        let words = transcription.words
        guard transcription.text.trimmingCharacters(in: .whitespaces).isEmpty || !words.isEmpty else { return nil }
        // cuts[i]: index of the first word of piece i + 1.
        var cuts: [Int] = []
        var next = 0
        var lastStart = 0.0
        for piece in pieces.dropFirst() {
            let origin = Double(piece.offset) / rate
            while next < words.count, (words[next].start ?? lastStart) < origin {
                lastStart = words[next].start ?? lastStart
                next += 1
            }
            cuts.append(Self.snapped(next, in: words, after: cuts.last ?? 0))
        }
        var shares: [[RecognizedWord]] = []
        for (index, piece) in pieces.enumerated() {
            let from = index == 0 ? 0 : cuts[index - 1]
            let to = index < cuts.count ? cuts[index] : words.count
            shares.append(Self.local(words[from..<max(from, to)], origin: Double(piece.offset) / rate, duration: Double(piece.count) / rate))
        }
        return shares.map { words in
            let confidences = words.compactMap(\.confidence)
            let confidence = confidences.isEmpty ? (words.isEmpty ? nil : transcription.confidence)
                : exp(confidences.reduce(0) { $0 + log(max($1, .leastNonzeroMagnitude)) } / Double(confidences.count))
            // The window's measures, with the share's own tokens.
            let measures = transcription.measures.map { var own = $0; own.tokens = words.flatMap(\.tokens); return own }
            return Transcription(text: words.map(\.text).joined(separator: " "), words: words, confidence: confidence, language: transcription.language,
                                 measures: measures)
        }
    }

    /// `words` with times from `origin` (seconds into the window), within the piece's `duration`.
    static func local(_ words: ArraySlice<RecognizedWord>, origin: Double, duration: Double) -> [RecognizedWord] {
        func local(_ time: Double?) -> Double? { time.map { min(max($0 - origin, 0), duration) } }
        return words.map { RecognizedWord(text: $0.text, start: local($0.start), end: local($0.end), confidence: $0.confidence, tokens: $0.tokens) }
    }

    /// `cut` moved to just after the nearest punctuated word — two words back or one forward —
    /// unless the word before it already ends one; never before `floor`.
    static func snapped(_ cut: Int, in words: [RecognizedWord], after floor: Int) -> Int {
        func endsClause(_ index: Int) -> Bool {
            guard index >= 0, index < words.count, let last = words[index].text.last else { return false }
            return ".?!,;:".contains(last)
        }
        for candidate in [cut, cut - 1, cut + 1, cut - 2] where candidate >= floor && candidate <= words.count && endsClause(candidate - 1) {
            return candidate
        }
        return max(cut, floor)
    }
}
