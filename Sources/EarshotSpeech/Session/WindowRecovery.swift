import Foundation

/// What a recording window's decode gave each of its segments once the segments it left without
/// text were decoded again.
///
/// Whisper sometimes ends a window early: on a window that runs from one reader into another it
/// wrote the first reader's last sentence, then end-of-text, and 16 s of the second reader's speech
/// came back as three empty segments (issue 26). Every segment of a window is speech (the detector
/// cut it), so a segment of at least ``minimumSamples`` with no words is decoded again: first each
/// run of such consecutive segments as a window of its own (another window boundary, the
/// neighbours' context kept within the run), then each one still empty alone. What is still empty
/// after that is *unheard*: the session flags its result and the daemon logs it, never passing it
/// off as silence.
///
/// A segment the window left *sparse* — at least ``sparseSamples`` long with fewer words than
/// ``sparseWordsPerSecond`` of it — is decoded again the same way (Whisper read "It" of a 4 s
/// sentence and ended the window there), and takes the retry's share when that has more words.
struct WindowTranscript: Sendable {
    /// Each segment's share, in piece order; nil when the window had no word times and cannot be
    /// split (``whole`` then holds its one result).
    var shares: [Transcription]?
    /// The window's transcription as decoded first.
    var whole: Transcription
    /// Segments that hold speech and still have no text.
    var unheard: Set<Int> = []
    /// Extra decodes made to recover segments.
    var retries = 0

    /// Shortest segment (samples at 16 kHz) that is decoded again and reported when it has no
    /// text: 1 s. The detector's shorter segments are often a breath or a click, which Whisper
    /// rightly leaves empty.
    static let minimumSamples = 16000
    /// Shortest segment whose sparse text is decoded again: 3 s.
    static let sparseSamples = 48000
    /// Fewer words a second than this (speech runs at 2–3) is a segment the decode skipped.
    static let sparseWordsPerSecond = 0.5
}

extension SegmentGroup {
    /// Decodes the window with `model` (blocking) and decodes again its segments that came back
    /// without text, as ``WindowTranscript`` says.
    func transcribe(with model: any SegmentTranscribing, sampleRate: Int) throws -> WindowTranscript {
        try recover(model.transcribe(samples, sampleRate: sampleRate), placedBy: self, with: model, sampleRate: sampleRate)
    }

    /// `transcription` split into this window's segments where `placement` has them (this window,
    /// or ``inPlace`` for a decode of the input from its first sample on), the empty ones decoded
    /// again from this window's samples.
    func recover(_ transcription: Transcription, placedBy placement: SegmentGroup, with model: any SegmentTranscribing,
                 sampleRate: Int) throws -> WindowTranscript {
        // No word times (then the window has text): one result over the window.
        guard let split = placement.split(transcription, sampleRate: sampleRate) else { return WindowTranscript(shares: nil, whole: transcription) }
        var result = WindowTranscript(shares: split, whole: transcription)
        var shares = split
        /// Pieces last decoded together with others: alone, they may still be heard.
        var decodedInGroup = Set(pieces.count > 1 ? Array(pieces.indices) : [])
        /// Empty pieces whose words a retry found at the edge of a neighbour's share.
        var heardBesideThem = Set<Int>()
        // First each run of empty pieces as its own window (not the whole window again), then each
        // piece still empty alone.
        for round in 0..<2 {
            let empty = Set(missing(shares)).subtracting(heardBesideThem).union(sparse(shares)).sorted()
            guard !empty.isEmpty else { break }
            let windows: [[Int]] = round == 0
                ? Self.runs(empty).filter { $0.count < pieces.count }
                : empty.filter { decodedInGroup.contains($0) }.map { [$0] }
            for indices in windows {
                let group = subgroup(indices)
                result.retries += 1
                let decoded = try model.transcribe(group.samples, sampleRate: sampleRate)
                guard let parts = group.split(decoded, sampleRate: sampleRate) else { continue }
                for (index, part) in zip(indices, parts) where !Self.isEmpty(part) {
                    if Self.isEmpty(shares[index]) {
                        if heardBeside(index, part, in: shares) { heardBesideThem.insert(index) } else { shares[index] = part }
                    } else if Self.normalized(part.text).count > Self.normalized(shares[index].text).count {
                        shares[index] = part
                    }
                }
                if indices.count == 1 { decodedInGroup.remove(indices[0]) }
            }
        }
        result.shares = shares
        result.unheard = Set(missing(shares)).subtracting(heardBesideThem)
        return result
    }

    /// Pieces of at least ``WindowTranscript/minimumSamples`` whose share has no text.
    private func missing(_ shares: [Transcription]) -> [Int] {
        pieces.indices.filter { pieces[$0].count >= WindowTranscript.minimumSamples && Self.isEmpty(shares[$0]) }
    }

    /// Pieces of at least ``WindowTranscript/sparseSamples`` whose share has text, but fewer words
    /// than ``WindowTranscript/sparseWordsPerSecond`` of it.
    private func sparse(_ shares: [Transcription]) -> [Int] {
        pieces.indices.filter { index in
            let seconds = Double(pieces[index].count) / 16000
            let words = Self.normalized(shares[index].text).count
            return pieces[index].count >= WindowTranscript.sparseSamples && words > 0 && Double(words) < seconds * WindowTranscript.sparseWordsPerSecond
        }
    }

    static func isEmpty(_ transcription: Transcription) -> Bool {
        transcription.text.allSatisfy { $0.isWhitespace || $0.isPunctuation }
    }

    /// Whether the words a retry found for piece `index` are the last words of the piece before it
    /// or the first of the piece after it: the window had heard them, and its cut gave them to the
    /// neighbour (Whisper's word times run early).
    private func heardBeside(_ index: Int, _ part: Transcription, in shares: [Transcription]) -> Bool {
        let words = Self.normalized(part.text)
        guard !words.isEmpty else { return false }
        let before = index > 0 ? Self.normalized(shares[index - 1].text) : []
        let after = index + 1 < shares.count ? Self.normalized(shares[index + 1].text) : []
        return before.suffix(words.count) == words[...] || after.prefix(words.count) == words[...]
    }

    private static func normalized(_ text: String) -> [String] {
        text.lowercased().split(whereSeparator: { $0.isWhitespace }).map { $0.filter { $0.isLetter || $0.isNumber } }.filter { !$0.isEmpty }
    }

    /// Sorted indices as runs of consecutive ones.
    static func runs(_ indices: [Int]) -> [[Int]] {
        var runs: [[Int]] = []
        for index in indices {
            if let last = runs.last?.last, last + 1 == index { runs[runs.count - 1].append(index) } else { runs.append([index]) }
        }
        return runs
    }

    /// The pieces at `indices` (ascending) as a window of their own, back to back.
    func subgroup(_ indices: [Int]) -> SegmentGroup {
        var group = SegmentGroup()
        for index in indices {
            let piece = pieces[index]
            group.append(SpeechSegment(startSample: piece.start, samples: Array(samples[piece.offset..<piece.offset + piece.count])))
        }
        return group
    }
}
