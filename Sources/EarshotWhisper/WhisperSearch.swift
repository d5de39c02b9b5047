import EarshotSystem
import Foundation

/// How a decode searches for its tokens, with faster-whisper's defaults and meanings.
struct WhisperSearchOptions: Sendable, Hashable {
    /// Sequences kept at temperature 0 (1: greedy).
    var beamSize = 5
    /// A beam stops when `beamSize × patience` sequences have ended.
    var patience = 1.0
    /// Ranking divides a sequence's log probability by its length raised to this power.
    var lengthPenalty = 1.0
    /// Samples drawn at each temperature above 0; the most probable wins.
    var bestOf = 5
    /// Temperatures tried in turn until a result passes the thresholds below.
    var temperatures: [Double] = [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    /// A result whose text compresses (zlib) better than this repeats itself: try the next temperature.
    var compressionRatioThreshold = 2.4
    /// A result whose average token log probability is below this is unsure: try the next temperature.
    var logProbThreshold = -1.0
    /// Above this no-speech probability, with an unsure result, the audio is silence (no text).
    var noSpeechThreshold = 0.6
    /// Text tokens a decode may produce.
    var maxTokens = 224
    /// Seed of the sampling at temperatures above 0 (the same audio decodes the same way).
    var seed: UInt64 = 0x5eed
}

/// One decoded sequence.
struct WhisperHypothesis: Sendable, Hashable {
    /// Text tokens (no end-of-text).
    var tokens: [Int]
    /// Each text token's log probability under the model (before any contextual boost).
    var logProbabilities: [Double]
    /// The sum the search ranked by: every token's log probability, end-of-text's included.
    var sumLogProbability: Double
    var finished: Bool

    /// OpenAI's average log probability: the sum over the text tokens and end-of-text.
    var averageLogProbability: Double { sumLogProbability / Double(tokens.count + 1) }

    func score(lengthPenalty: Double) -> Double {
        sumLogProbability / pow(Double(max(1, tokens.count)), lengthPenalty)
    }
}

/// Beam search, greedy search and sampling over ``WhisperGraphs``, with OpenAI's logit rules:
/// special and non-speech tokens suppressed, and neither a blank nor end-of-text first. Several
/// decodes' searches can run in lockstep, one decoder call per step for all their sequences.
struct WhisperSearch: Sendable {
    let graphs: WhisperGraphs
    let options: WhisperSearchOptions
    let bias: ContextBias?
    /// Tokens never produced: every special token but end-of-text, the non-speech symbols and
    /// tokens without text.
    private let suppressed: [Int]

    init(graphs: WhisperGraphs, options: WhisperSearchOptions, bias: ContextBias?) {
        self.graphs = graphs
        self.options = options
        self.bias = bias
        let vocabulary = graphs.vocabulary
        suppressed = Array((vocabulary.endOfText + 1)..<vocabulary.vocabularySize) + vocabulary.nonSpeech
            + (0..<vocabulary.endOfText).filter { vocabulary.bytes[$0].isEmpty }
    }

    /// What the first decoder call gave a decode besides its first logits.
    struct Start {
        /// The call over the initial tokens of every decode started with it (one row each).
        let step: DecoderStep
        /// This decode's row in it.
        let row: Int
        /// Probability of the no-speech token at the start-of-transcript position.
        let noSpeechProbability: Double
    }

    /// Runs each decode's prompt and start-of-transcript tokens (`initials`, all of one length;
    /// decode i's start-of-transcript at `sotIndices[i]`, its audio i of `cross`) through the
    /// decoder in one call.
    static func start(_ initials: [[Int]], sotIndices: [Int], cross: CrossAttention, graphs: WhisperGraphs) throws -> [Start] {
        // The logits of each start-of-transcript (its no-speech probability) and of the last token.
        let step = try graphs.step(initials, cache: nil, cross: cross, logitsAt: Array(Set(sotIndices + [initials[0].count - 1])).sorted())
        return sotIndices.enumerated().map { row, sotIndex in
            let probabilities = logSoftmax(Array(step.logits(sequence: row, position: sotIndex)))
            return Start(step: step, row: row, noSpeechProbability: exp(probabilities[graphs.vocabulary.noSpeech]))
        }
    }

    /// One decode's search in progress.
    struct Progress {
        struct Live {
            var hypothesis: WhisperHypothesis
            /// Its row in the current decoder call.
            var row: Int
            var biasStates: [Int]
        }
        var live: [Live]
        var finished: [WhisperHypothesis] = []
        var random: SplitMix64
        var done = false
    }

    /// Runs searches at `temperature` and hands each one's sequences, best first, to `found` as
    /// soon as it ends. Search i decodes audio i of `cross` from `starts[i]` (rows of one first
    /// call, `initialCount` tokens each); all advance together, one decoder call per step for the
    /// sequences of every search still going (each audio's rows padded to the widest with copies,
    /// whose results are not read).
    static func run(_ searches: [WhisperSearch], from starts: [Start], initialCount: Int, cross: CrossAttention, temperature: Double,
                    found: (Int, [WhisperHypothesis]) -> Void) throws {
        precondition(searches.count == starts.count && searches.count == cross.batch, "one start and one audio per search")
        guard let graphs = searches.first?.graphs else { return }
        var progress = zip(searches, starts).map { $0.begin(row: $1.row, temperature: temperature) }
        var step = starts[0].step
        var position = initialCount - 1
        let budget = max(1, searches.map { min($0.options.maxTokens, graphs.textContext - initialCount - 1) }.max() ?? 1)
        var active = Array(searches.indices)
        // The audios of the searches still going, in `active`'s order.
        var audios = cross
        for index in 0..<budget {
            let current = step, at = position, searching = active
            progress.withUnsafeMutableBufferPointer { states in
                let states = UncheckedBuffer(states)
                let each: @Sendable (Int) -> Void = { k in
                    let search = searching[k]
                    searches[search].advance(&states.buffer[search], step: current, position: at, index: index, temperature: temperature)
                }
                // Each search's candidates on a thread of its own (the scoring of a row's logits
                // is as long as the decoder call's share of that row).
                if active.count > 1 { DispatchQueue.concurrentPerform(iterations: active.count, execute: each) } else { each(0) }
            }
            let going = active.filter { search in
                let budgetLeft = index < min(searches[search].options.maxTokens, graphs.textContext - initialCount - 1) - 1
                if !budgetLeft { progress[search].done = true }
                if progress[search].done { found(search, searches[search].ranked(progress[search])) }
                return !progress[search].done
            }
            if going.isEmpty { return }
            let width = going.map { progress[$0].live.count }.max() ?? 1
            var rows: [Int] = [], tokens: [[Int]] = []
            for (slot, search) in going.enumerated() {
                let live = progress[search].live
                for index in 0..<(going.count == 1 ? live.count : width) {
                    let sequence = live[min(index, live.count - 1)]
                    rows.append(sequence.row)
                    tokens.append([sequence.hypothesis.tokens.last!])
                }
                for index in live.indices { progress[search].live[index].row = slot * width + index }
            }
            let cache = try step.cache.reordered(rows)
            // A search that ends takes its audio out of the batch (a copy of the others', once).
            if going != active { audios = try audios.audios(going.map { active.firstIndex(of: $0)! }) }
            step = try graphs.step(tokens, cache: cache, cross: audios)
            active = going
            position = 0
        }
    }

    /// The sequences found at `temperature` from `start` (of a first call over this decode alone), best first.
    func run(from start: Start, initialCount: Int, cross: CrossAttention, temperature: Double) throws -> [WhisperHypothesis] {
        var result: [WhisperHypothesis] = []
        try Self.run([self], from: [start], initialCount: initialCount, cross: cross, temperature: temperature) { result = $1 }
        return result
    }

    /// A search's sequences, ended and still going, best first.
    private func ranked(_ progress: Progress) -> [WhisperHypothesis] {
        (progress.finished + progress.live.map(\.hypothesis)).sorted {
            $0.score(lengthPenalty: options.lengthPenalty) > $1.score(lengthPenalty: options.lengthPenalty)
        }
    }

    /// Sequences searched at `temperature` (samples above 0, beams at 0).
    private func width(at temperature: Double) -> Int {
        temperature > 0 ? max(1, options.bestOf) : max(1, options.beamSize)
    }

    private func begin(row: Int, temperature: Double) -> Progress {
        let root = Progress.Live(hypothesis: WhisperHypothesis(tokens: [], logProbabilities: [], sumLogProbability: 0, finished: false),
                                 row: row, biasStates: bias.map { [$0.root] } ?? [])
        return Progress(live: Array(repeating: root, count: temperature > 0 ? width(at: temperature) : 1),
                        random: SplitMix64(seed: options.seed &+ UInt64(temperature * 1000)))
    }

    /// One step of the search: every live sequence's candidates from `step`'s logits at
    /// `position` of its row; the survivors keep their rows (the next call's cache takes them).
    private func advance(_ progress: inout Progress, step: DecoderStep, position: Int, index: Int, temperature: Double) {
        let sampling = temperature > 0
        let width = width(at: temperature)
        let wanted = sampling ? width : max(1, Int((Double(width) * options.patience).rounded()))
        struct Candidate {
            var source: Int
            var token: Int
            var logProbability: Double
            var sum: Double
        }
        var candidates: [Candidate] = []
        for (sourceIndex, sequence) in progress.live.enumerated() {
            var logits = Array(step.logits(sequence: sequence.row, position: position))
            suppress(&logits, first: index == 0)
            // The model's own log probabilities are reported; the search ranks by the biased ones.
            let unbiased = bias == nil ? nil : logits
            let model = Self.logNormaliser(logits)
            bias?.boost(&logits, states: sequence.biasStates, atStart: index == 0)
            let ranking = bias == nil ? model : Self.logNormaliser(logits)
            let picked = sampling ? [Self.sample(logits, temperature: temperature, using: &progress.random)] : Self.top(logits, count: width + 1)
            for token in picked {
                let ranked = Double(logits[token] - ranking)
                candidates.append(Candidate(source: sourceIndex, token: token, logProbability: Double((unbiased?[token] ?? logits[token]) - model),
                                            sum: sequence.hypothesis.sumLogProbability + ranked))
            }
        }
        if !sampling { candidates.sort { $0.sum > $1.sum } }
        var next: [Progress.Live] = []
        for candidate in candidates {
            var sequence = progress.live[candidate.source]
            sequence.hypothesis.sumLogProbability = candidate.sum
            if candidate.token == graphs.vocabulary.endOfText {
                sequence.hypothesis.finished = true
                if progress.finished.count < wanted { progress.finished.append(sequence.hypothesis) }
                continue
            }
            sequence.hypothesis.tokens.append(candidate.token)
            sequence.hypothesis.logProbabilities.append(candidate.logProbability)
            sequence.biasStates = bias?.advance(sequence.biasStates, with: candidate.token) ?? []
            next.append(sequence)
            // A beam keeps its `width` best; ends found below them do not count (OpenAI's rule).
            if !sampling && next.count == width { break }
        }
        progress.live = next
        if next.isEmpty || (!sampling && progress.finished.count >= wanted) { progress.done = true }
    }

    /// OpenAI's suppression: ``suppressed``, and first, a blank or end-of-text.
    private func suppress(_ logits: inout [Float], first: Bool) {
        let vocabulary = graphs.vocabulary
        for token in suppressed where token < logits.count { logits[token] = -.infinity }
        if first {
            logits[vocabulary.blank] = -.infinity
            logits[vocabulary.endOfText] = -.infinity
        }
    }

    static func logSoftmax(_ logits: [Float]) -> [Double] {
        let normaliser = logNormaliser(logits)
        return logits.map { $0 == -.infinity ? -.infinity : Double($0 - normaliser) }
    }

    /// log Σ exp(logits): a token's log probability is its logit minus this.
    static func logNormaliser(_ logits: [Float]) -> Float {
        logits.withUnsafeBufferPointer { values in
            var top = -Float.infinity
            for value in values where value > top { top = value }
            var sum: Float = 0
            for value in values { sum += expf(value - top) }
            return top + logf(sum)
        }
    }

    /// The `count` indices with the largest values, largest first.
    static func top(_ values: [Float], count: Int) -> [Int] {
        var best: [(Float, Int)] = []
        best.reserveCapacity(count + 1)
        var floor = -Float.infinity
        values.withUnsafeBufferPointer { values in
            for index in values.indices where values[index] > floor {
                let value = values[index]
                var at = best.count
                while at > 0 && best[at - 1].0 < value { at -= 1 }
                best.insert((value, index), at: at)
                if best.count > count { best.removeLast() }
                if best.count == count { floor = best[count - 1].0 }
            }
        }
        return best.map(\.1)
    }

    static func sample(_ logits: [Float], temperature: Double, using random: inout SplitMix64) -> Int {
        let top = Double(logits.max() ?? 0)
        let weights = logits.map { $0 == -.infinity ? 0 : exp((Double($0) - top) / temperature) }
        let total = weights.reduce(0, +)
        guard total.isFinite, total > 0 else { return Self.top(logits, count: 1).first ?? 0 }
        var target = Double.random(in: 0..<total, using: &random)
        for (index, weight) in weights.enumerated() where weight > 0 {
            target -= weight
            if target < 0 { return index }
        }
        return weights.lastIndex { $0 > 0 } ?? 0
    }
}

/// A buffer handed to `DispatchQueue.concurrentPerform`, whose iterations each touch elements of
/// their own.
private struct UncheckedBuffer<Element>: @unchecked Sendable {
    let buffer: UnsafeMutableBufferPointer<Element>
    init(_ buffer: UnsafeMutableBufferPointer<Element>) { self.buffer = buffer }
}
