import Foundation

/// The two ONNX graphs of a converted Whisper model (Scripts/models/whisper-ct2-to-onnx.py)
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
    /// The converter version these graphs need (3: each layer's cross-attention K/V an input of
    /// its own, several audios per decoder call; 4: logits of the positions asked for only).
    static let graphVersion = 4

    private let encoder: ORTSession
    private let decoder: ORTSession
    /// Taken for every run of either graph: as many runs at once as the cores hold the model's
    /// threads (2 threads on 2 cores: one; a 1-thread copy: two), so overlapping decodes take
    /// turns instead of oversubscribing the cores.
    private let compute: DispatchSemaphore

    /// Loads both graphs with `threads` threads each. Blocking.
    init(encoder encoderPath: String, decoder decoderPath: String, tokens: String, threads: Int) throws {
        for path in [encoderPath, decoderPath, tokens] where !FileManager.default.isReadableFile(atPath: path) {
            throw WhisperModelError.missingFile(path)
        }
        compute = DispatchSemaphore(value: max(1, ProcessInfo.processInfo.activeProcessorCount / max(1, threads)))
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
        let version = metadata("version").flatMap { Int($0) } ?? 0
        guard version >= Self.graphVersion else {
            throw WhisperModelError.unsupported("the model's graphs are converter version \(version); Earshot's decoder needs \(Self.graphVersion) (update the asset: earshotctl update)")
        }
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
        let outputs = try computing { try encoder.run([("mel", mel)], outputs: ["n_layer_cross_k", "n_layer_cross_v"]) }
        return try CrossAttention(encoded: outputs[0], values: outputs[1])
    }

    /// Runs `run` holding one of the model's ``compute`` turns. Blocking.
    private func computing<T>(_ run: () throws -> T) rethrows -> T {
        compute.wait()
        defer { compute.signal() }
        return try run()
    }

    /// One decoder call for `tokens` (one row per sequence, all of one length) after `cache`,
    /// with the logits of the token positions `logitsAt` (nil: the last). The rows are grouped by
    /// audio: `cross` holds A audios and audio a's sequences are rows a·R ..< (a + 1)·R,
    /// R = rows / A (one audio: any number of rows).
    func step(_ tokens: [[Int]], cache: SelfAttentionCache?, cross: CrossAttention, attention: Bool = false,
              logitsAt positions: [Int]? = nil) throws -> DecoderStep {
        let batch = tokens.count, count = tokens.first?.count ?? 0
        precondition(batch % cross.batch == 0, "\(batch) sequences for \(cross.batch) audios")
        let positions = positions ?? [count - 1]
        precondition(!positions.isEmpty && positions.allSatisfy { (0..<count).contains($0) }, "logits of positions \(positions) of \(count)")
        let cache = try cache ?? SelfAttentionCache.empty(layers: layers, batch: batch, state: state)
        let input = try ORTValue.int64s([batch, count], tokens.flatMap { $0.map(Int64.init) })
        let offset = try ORTValue.int64s([1], [Int64(cache.length)])
        var names = ["logits", "out_n_layer_self_k_cache", "out_n_layer_self_v_cache"]
        if attention { names.append("cross_attention_weights") }
        var inputs = [
            ("tokens", input), ("in_n_layer_self_k_cache", cache.keys), ("in_n_layer_self_v_cache", cache.values), ("offset", offset),
            ("cross_frames", try ORTValue.int64s([cross.batch], cross.frames.map(Int64.init))),
            ("logit_positions", try ORTValue.int64s([positions.count], positions.map(Int64.init))),
        ]
        for layer in 0..<layers {
            inputs.append(("cross_k_\(layer)", cross.keys[layer]))
            inputs.append(("cross_v_\(layer)", cross.values[layer]))
        }
        let outputs = try computing { try decoder.run(inputs, outputs: names) }
        return DecoderStep(
            logits: outputs[0], positions: positions,
            cache: SelfAttentionCache(keys: outputs[1], values: outputs[2], layers: layers, batch: batch, length: cache.length + count, state: state),
            attention: attention ? outputs[3] : nil)
    }
}

/// What the encoder wrote for the decoder: each layer's cross-attention keys and values, for
/// `batch` audios, each serving any number of sequences of its audio (a beam, samples). Held per
/// layer, as the decoder takes them (`cross_k_i`, `cross_v_i`).
struct CrossAttention: @unchecked Sendable {
    // @unchecked: the values are read only, by the decodes of one batch.
    /// Each layer's keys (audio, state, frames): K transposed, head h's rows at h × head state.
    let keys: [ORTValue]
    /// Each layer's values (audio, heads × frames, head state): head h's frames at h × frames.
    let values: [ORTValue]
    /// Each audio's encoder output frames (two feature frames each: 20 ms); the frames after
    /// them, up to ``audioFrames``, are padding no sequence attends to.
    let frames: [Int]
    /// Encoder output frames held per audio.
    let audioFrames: Int
    var batch: Int { frames.count }

    /// The encoder's outputs, (layers, audios, …) each, as views of each layer (no copy).
    init(encoded keys: ORTValue, values: ORTValue) throws {
        let shape = keys.shape
        self.keys = try Self.views(keys, count: shape[1])
        self.values = try Self.views(values, count: shape[1])
        frames = Array(repeating: shape[3], count: shape[1])
        audioFrames = shape[3]
    }

    fileprivate init(keys: [ORTValue], values: [ORTValue], frames: [Int], audioFrames: Int) {
        self.keys = keys
        self.values = values
        self.frames = frames
        self.audioFrames = audioFrames
    }

    /// Views of each leading-axis block of `value` (a layer), holding its first `count` entries
    /// of the next axis (audios).
    private static func views(_ value: ORTValue, count: Int) throws -> [ORTValue] {
        let shape = value.shape, block = shape.dropFirst().reduce(1, *)
        var inner = Array(shape.dropFirst())
        inner[0] = count
        return try (0..<shape[0]).map { try ORTValue.view(of: value, offset: $0 * block, shape: inner) }
    }

    /// The audios at `indices`, in that order: views when they are the first ones (the batch's
    /// last audios ended), a copy otherwise.
    func audios(_ indices: [Int]) throws -> CrossAttention {
        if indices == Array(0..<batch) { return self }
        let picked = indices.map { frames[$0] }
        if indices == Array(0..<indices.count) {
            func first(_ layer: ORTValue) throws -> ORTValue {
                try ORTValue.view(of: layer, offset: 0, shape: [indices.count] + layer.shape.dropFirst())
            }
            return CrossAttention(keys: try keys.map(first), values: try values.map(first), frames: picked, audioFrames: audioFrames)
        }
        // Each layer (audio, …) as a (1, audio, …) view, so ``gather`` takes its rows.
        func gathered(_ layers: [ORTValue]) throws -> [ORTValue] {
            try layers.map { layer in
                let shape = layer.shape
                let rows = try Self.gather(try ORTValue.view(of: layer, offset: 0, shape: [1] + shape), batch: batch, rows: indices)
                return try ORTValue.view(of: rows, offset: 0, shape: [indices.count] + shape.dropFirst())
            }
        }
        return CrossAttention(keys: try gathered(keys), values: try gathered(values), frames: picked, audioFrames: audioFrames)
    }

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

/// Several audios' keys and values in one batch, each padded to the longest: room made once, each
/// audio copied in as soon as it is encoded (its own copy then goes), so a batch never holds an
/// audio's keys and values twice.
struct CrossAttentionBatch {
    private let keys: [ORTValue]
    private let values: [ORTValue]
    private let state: Int
    private let heads: Int
    private let headState: Int
    private let audioFrames: Int
    /// Encoder frames of each audio placed so far, slot by slot.
    private var frames: [Int] = []

    /// Room for `audios` audios, none longer than `longest` (one audio; its shapes are the batch's).
    init(audios: Int, longest: CrossAttention) throws {
        precondition(longest.batch == 1, "room sized by one audio")
        state = longest.keys[0].shape[1]
        headState = longest.values[0].shape[2]
        heads = state / headState
        audioFrames = longest.audioFrames
        let (state, heads, headState, frames) = (state, heads, headState, audioFrames)
        keys = try longest.keys.indices.map { _ in try ORTValue.floats([audios, state, frames]) { $0.initialize(repeating: 0) } }
        values = try longest.values.indices.map { _ in try ORTValue.floats([audios, heads * frames, headState]) { $0.initialize(repeating: 0) } }
    }

    /// Copies one audio's keys and values into the next slot, padded; returns the slot.
    mutating func place(_ part: CrossAttention) -> Int {
        let slot = frames.count, width = part.audioFrames
        precondition(part.batch == 1 && slot < keys[0].shape[0] && width <= audioFrames, "an audio that does not fit the batch")
        for layer in keys.indices {
            // Keys: each of the audio's `state` rows padded to the batch's frames.
            let keyRoom = keys[layer].mutableFloats(), keySource = part.keys[layer].floats()
            for row in 0..<state {
                let to = (slot * state + row) * audioFrames
                _ = UnsafeMutableBufferPointer(rebasing: keyRoom[to..<(to + width)]).initialize(from: keySource[(row * width)..<((row + 1) * width)])
            }
            // Values: each head's frames padded to the batch's.
            let valueRoom = values[layer].mutableFloats(), valueSource = part.values[layer].floats(), block = width * headState
            for head in 0..<heads {
                let to = (slot * heads + head) * audioFrames * headState
                _ = UnsafeMutableBufferPointer(rebasing: valueRoom[to..<(to + block)]).initialize(from: valueSource[(head * block)..<((head + 1) * block)])
            }
        }
        frames.append(part.frames[0])
        return slot
    }

    /// The audios placed, as one batch.
    func placed() throws -> CrossAttention {
        let all = CrossAttention(keys: keys, values: values, frames: frames + Array(repeating: 0, count: keys[0].shape[0] - frames.count), audioFrames: audioFrames)
        return frames.count == keys[0].shape[0] ? all : try all.audios(Array(frames.indices))
    }

    /// The audio in `slot` alone: a view of the batch's storage (its padding masked).
    func audio(_ slot: Int) throws -> CrossAttention {
        let keyBlock = state * audioFrames, valueBlock = heads * audioFrames * headState
        return CrossAttention(keys: try keys.map { try ORTValue.view(of: $0, offset: slot * keyBlock, shape: [1, state, audioFrames]) },
                              values: try values.map { try ORTValue.view(of: $0, offset: slot * valueBlock, shape: [1, heads * audioFrames, headState]) },
                              frames: [frames[slot]], audioFrames: audioFrames)
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
    /// The token positions whose logits the call computed, in the logits' order.
    let positions: [Int]
    let cache: SelfAttentionCache
    let attention: ORTValue?
    /// The logits' storage and row length, looked up once (every sequence reads its row each step).
    private let storage: UnsafeBufferPointer<Float>
    private let vocabulary: Int

    init(logits: ORTValue, positions: [Int], cache: SelfAttentionCache, attention: ORTValue?) {
        self.logits = logits
        self.positions = positions
        self.cache = cache
        self.attention = attention
        storage = logits.floats()
        vocabulary = storage.count / max(1, cache.batch * positions.count)
    }

    /// The logits after position `position` (one the call computed) of sequence `sequence`.
    func logits(sequence: Int, position: Int) -> UnsafeBufferPointer<Float> {
        guard let index = positions.firstIndex(of: position) else { preconditionFailure("no logits at position \(position) of \(positions)") }
        let start = (sequence * positions.count + index) * vocabulary
        return UnsafeBufferPointer(rebasing: storage[start..<(start + vocabulary)])
    }
}
