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
/// special and non-speech tokens suppressed, and neither a blank nor end-of-text first.
struct WhisperSearch {
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

    /// What the first decoder call gave besides the first logits.
    struct Start {
        let step: DecoderStep
        /// Probability of the no-speech token at the start-of-transcript position.
        let noSpeechProbability: Double
    }

    /// Runs the prompt and start-of-transcript tokens (`initial`, whose start-of-transcript is at
    /// `sotIndex`) through the decoder once.
    func start(_ initial: [Int], sotIndex: Int, cross: CrossAttention) throws -> Start {
        let step = try graphs.step([initial], cache: nil, cross: cross)
        let row = step.logits(sequence: 0, position: sotIndex)
        let probabilities = Self.logSoftmax(Array(row))
        return Start(step: step, noSpeechProbability: exp(probabilities[graphs.vocabulary.noSpeech]))
    }

    /// The sequences found at `temperature`, best first.
    func run(from start: Start, initialCount: Int, cross: CrossAttention, temperature: Double) throws -> [WhisperHypothesis] {
        let width = temperature > 0 ? max(1, options.bestOf) : max(1, options.beamSize)
        let sampling = temperature > 0
        let wanted = sampling ? width : max(1, Int((Double(width) * options.patience).rounded()))
        var random = SplitMix64(seed: options.seed &+ UInt64(temperature * 1000))

        struct Live {
            var hypothesis: WhisperHypothesis
            var row: Int
            var biasStates: [Int]
        }
        let rootStates = bias.map { [$0.root] } ?? []
        var live = [Live(hypothesis: WhisperHypothesis(tokens: [], logProbabilities: [], sumLogProbability: 0, finished: false),
                         row: 0, biasStates: rootStates)]
        if sampling { live = Array(repeating: live[0], count: width) }
        var finished: [WhisperHypothesis] = []
        var step = start.step
        var position = initialCount - 1
        let budget = min(options.maxTokens, graphs.textContext - initialCount - 1)

        for index in 0..<max(1, budget) {
            struct Candidate {
                var source: Int
                var token: Int
                var logProbability: Double
                var sum: Double
            }
            var candidates: [Candidate] = []
            for (sourceIndex, sequence) in live.enumerated() {
                var logits = Array(step.logits(sequence: sequence.row, position: position))
                suppress(&logits, first: index == 0)
                // The model's own log probabilities are reported; the search ranks by the biased ones.
                let unbiased = bias == nil ? nil : logits
                let model = Self.logNormaliser(logits)
                bias?.boost(&logits, states: sequence.biasStates, atStart: index == 0)
                let ranking = bias == nil ? model : Self.logNormaliser(logits)
                let picked = sampling ? [Self.sample(logits, temperature: temperature, using: &random)] : Self.top(logits, count: width + 1)
                for token in picked {
                    let ranked = Double(logits[token] - ranking)
                    candidates.append(Candidate(source: sourceIndex, token: token, logProbability: Double((unbiased?[token] ?? logits[token]) - model),
                                                sum: sequence.hypothesis.sumLogProbability + ranked))
                }
            }
            if !sampling { candidates.sort { $0.sum > $1.sum } }
            var next: [Live] = []
            for candidate in candidates {
                var sequence = live[candidate.source]
                sequence.hypothesis.sumLogProbability = candidate.sum
                if candidate.token == graphs.vocabulary.endOfText {
                    sequence.hypothesis.finished = true
                    if finished.count < wanted { finished.append(sequence.hypothesis) }
                    continue
                }
                sequence.hypothesis.tokens.append(candidate.token)
                sequence.hypothesis.logProbabilities.append(candidate.logProbability)
                sequence.biasStates = bias?.advance(sequence.biasStates, with: candidate.token) ?? []
                // `sequence.row` is still its row in this step's batch: the next step's cache takes it.
                next.append(sequence)
                // A beam keeps its `width` best; ends found below them do not count (OpenAI's rule).
                if !sampling && next.count == width { break }
            }
            live = next
            if live.isEmpty || (!sampling && finished.count >= wanted) { break }
            if index == budget - 1 { break }
            let rows = live.map(\.row)
            let cache = try step.cache.reordered(rows)
            step = try graphs.step(live.map { [$0.hypothesis.tokens.last!] }, cache: cache, cross: cross)
            for index in live.indices { live[index].row = index }
            position = 0
        }
        let all = finished + live.map(\.hypothesis)
        return all.sorted { $0.score(lengthPenalty: options.lengthPenalty) > $1.score(lengthPenalty: options.lengthPenalty) }
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
