import Foundation

/// The two ONNX graphs of a converted Whisper model (Scripts/models/whisper-ct2-to-sherpa-onnx.py)
/// and the calls the decoder makes on them: the encoder once per audio, the decoder once per step
/// for every sequence of a batch (beams, samples or sessions) at once. Loaded once per model,
/// whatever the language, task or search of the decodes that use it.
final class WhisperGraphs: Sendable {
    let vocabulary: WhisperVocabulary
    let mels: Int
    let layers: Int
    let state: Int
    let textContext: Int
    /// The cross-attention heads whose weights follow the audio (layer, head), as the decoder's
    /// `cross_attention_weights` output lists them.
    let alignmentHeads: Int

    private let encoder: ORTSession
    private let decoder: ORTSession

    /// Loads both graphs with `threads` threads each. Blocking.
    init(encoder encoderPath: String, decoder decoderPath: String, tokens: String, threads: Int) throws {
        for path in [encoderPath, decoderPath, tokens] where !FileManager.default.isReadableFile(atPath: path) {
            throw WhisperModelError.missingFile(path)
        }
        encoder = try ORTSession(path: encoderPath, threads: threads, metadataKeys: WhisperVocabulary.metadataKeys)
        decoder = try ORTSession(path: decoderPath, threads: threads)
        vocabulary = try WhisperVocabulary(tokensFile: tokens, metadata: encoder.metadata)
        let metadata = encoder.metadata
        func number(_ key: String) throws -> Int {
            guard let value = metadata(key).flatMap({ Int($0) }) else { throw WhisperModelError.badMetadata(key) }
            return value
        }
        mels = try number("n_mels")
        layers = try number("n_text_layer")
        state = try number("n_text_state")
        textContext = try number("n_text_ctx")
        alignmentHeads = (metadata("alignment_heads") ?? "").split(separator: ",").count
    }

    /// The encoder's cross-attention keys and values for `frames` feature frames (frame-major,
    /// `mels` each), padded with `padding` zero frames: one audio, batch 1.
    func encode(_ features: [Float], frames: Int, padding: Int) throws -> CrossAttention {
        let total = frames + padding
        let mel = try ORTValue.floats([1, mels, total]) { storage in
            storage.initialize(repeating: 0)
            for frame in 0..<frames {
                for bin in 0..<mels { storage[bin * total + frame] = features[frame * mels + bin] }
            }
        }
        let outputs = try encoder.run([("mel", mel)], outputs: ["n_layer_cross_k", "n_layer_cross_v"])
        return CrossAttention(keys: outputs[0], values: outputs[1], batch: 1, audioFrames: total / 2)
    }

    /// One decoder call for `tokens` (one row per sequence, all of one length) after `cache`.
    func step(_ tokens: [[Int]], cache: SelfAttentionCache?, cross: CrossAttention, attention: Bool = false) throws -> DecoderStep {
        let batch = tokens.count, count = tokens.first?.count ?? 0
        // One audio's keys and values serve every sequence (MatMul broadcasts its batch of 1).
        precondition(cross.batch == batch || cross.batch == 1, "cross-attention batch \(cross.batch) for \(batch) sequences")
        let cache = try cache ?? SelfAttentionCache.empty(layers: layers, batch: batch, state: state)
        let input = try ORTValue.int64s([batch, count], tokens.flatMap { $0.map(Int64.init) })
        let offset = try ORTValue.int64s([1], [Int64(cache.length)])
        var names = ["logits", "out_n_layer_self_k_cache", "out_n_layer_self_v_cache"]
        if attention { names.append("cross_attention_weights") }
        let outputs = try decoder.run([
            ("tokens", input), ("in_n_layer_self_k_cache", cache.keys), ("in_n_layer_self_v_cache", cache.values),
            ("n_layer_cross_k", cross.keys), ("n_layer_cross_v", cross.values), ("offset", offset),
        ], outputs: names)
        return DecoderStep(
            logits: outputs[0], tokens: count,
            cache: SelfAttentionCache(keys: outputs[1], values: outputs[2], layers: layers, batch: batch, length: cache.length + count, state: state),
            attention: attention ? outputs[3] : nil)
    }
}

/// What the encoder wrote for the decoder: each layer's cross-attention keys and values, for
/// `batch` audios (1 serves any number of sequences of that audio: a beam, samples).
struct CrossAttention: @unchecked Sendable {
    // @unchecked: the values are read only, by one decode.
    let keys: ORTValue
    let values: ORTValue
    let batch: Int
    /// Encoder output frames (two feature frames each: 20 ms).
    let audioFrames: Int

    /// A (layers, batch, …) tensor with its batch rows taken in `rows` order.
    static func gather(_ value: ORTValue, batch: Int, rows: [Int]) throws -> ORTValue {
        let shape = value.shape
        precondition(shape.count > 2 && shape[1] == batch && rows.allSatisfy { (0..<batch).contains($0) }, "rows \(rows) of a batch of \(batch)")
        let layers = shape[0], block = shape.dropFirst(2).reduce(1, *)
        let source = value.floats()
        return try ORTValue.floats([layers, rows.count] + Array(shape.dropFirst(2))) { out in
            for layer in 0..<layers {
                for (index, row) in rows.enumerated() {
                    let from = (layer * batch + row) * block, to = (layer * rows.count + index) * block
                    _ = UnsafeMutableBufferPointer(rebasing: out[to..<(to + block)]).initialize(from: source[from..<(from + block)])
                }
            }
        }
    }
}

/// The decoder's self-attention keys and values for the positions decoded so far.
struct SelfAttentionCache: @unchecked Sendable {
    // @unchecked: read only, by one decode.
    let keys: ORTValue
    let values: ORTValue
    let layers: Int
    let batch: Int
    let length: Int
    let state: Int

    static func empty(layers: Int, batch: Int, state: Int) throws -> SelfAttentionCache {
        let keys = try ORTValue.floats([layers, batch, 0, state]) { _ in }
        let values = try ORTValue.floats([layers, batch, 0, state]) { _ in }
        return SelfAttentionCache(keys: keys, values: values, layers: layers, batch: batch, length: 0, state: state)
    }

    /// The cache with its sequences taken in `rows` order (beams that survive a step).
    func reordered(_ rows: [Int]) throws -> SelfAttentionCache {
        if rows == Array(0..<batch) { return self }
        return SelfAttentionCache(keys: try CrossAttention.gather(keys, batch: batch, rows: rows),
                                  values: try CrossAttention.gather(values, batch: batch, rows: rows),
                                  layers: layers, batch: rows.count, length: length, state: state)
    }
}

/// One decoder call's outputs.
struct DecoderStep: @unchecked Sendable {
    // @unchecked: read only, by one decode.
    let logits: ORTValue
    let tokens: Int
    let cache: SelfAttentionCache
    let attention: ORTValue?
    /// The logits' storage and row length, looked up once (every sequence reads its row each step).
    private let storage: UnsafeBufferPointer<Float>
    private let vocabulary: Int

    init(logits: ORTValue, tokens: Int, cache: SelfAttentionCache, attention: ORTValue?) {
        self.logits = logits
        self.tokens = tokens
        self.cache = cache
        self.attention = attention
        storage = logits.floats()
        vocabulary = storage.count / max(1, cache.batch * tokens)
    }

    /// The logits after position `position` of sequence `sequence`.
    func logits(sequence: Int, position: Int) -> UnsafeBufferPointer<Float> {
        let start = (sequence * tokens + position) * vocabulary
        return UnsafeBufferPointer(rebasing: storage[start..<(start + vocabulary)])
    }
}
