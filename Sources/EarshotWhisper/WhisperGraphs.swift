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
    /// its own, several audios per decoder call; 4: logits of the positions asked for only; 5:
    /// each layer's self-attention cache an input of its own, read where ``SelfAttentionCache``
    /// keeps it, and only the new positions' keys and values out).
    static let graphVersion = 5

    private let encoder: ORTSession
    private let decoder: ORTSession
    /// Taken for every run of either graph: as many runs at once as the cores hold the model's
    /// threads (2 threads on 2 cores: one; a 1-thread copy: two), so overlapping decodes take
    /// turns instead of oversubscribing the cores.
    private let compute: DispatchSemaphore
    /// Taken instead of ``compute`` by an encode ahead of its search (a conditioned recording's
    /// next window, while the window before decodes): one at a time, beside the other runs. On 2
    /// cores the decoder's steps leave about a fifth of the cores idle (scoring between steps),
    /// which it fills: long files in 0.85–0.93× the time, where within ``compute``'s turns it
    /// was no faster (Benchmarks/README.md, session 24).
    private let ahead = DispatchSemaphore(value: 1)
    /// Self-attention storage the model's decodes have let go, to take again.
    private let storagePool = SelfAttentionStorage.Pool()

    /// Loads both graphs with `threads` threads each. Blocking.
    init(encoder encoderPath: String, decoder decoderPath: String, tokens: String, threads: Int) throws {
        for path in [encoderPath, decoderPath, tokens] where !FileManager.default.isReadableFile(atPath: path) {
            throw WhisperModelError.missingFile(path)
        }
        compute = DispatchSemaphore(value: max(1, ProcessInfo.processInfo.activeProcessorCount / max(1, threads)))
        // The encoder runs without a memory pattern: with one, a loaded model kept its work twice
        // (the pattern's block and the first run's chunks), 35 MiB of base's 265; the decoder's
        // many small steps keep theirs (Benchmarks/README.md, "engine-memory.sh", session 23).
        encoder = try ORTSession(path: encoderPath, threads: threads, memoryPattern: false, metadataKeys: WhisperVocabulary.metadataKeys)
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
    /// `mels` each), padded with `padding` zero frames: one audio, batch 1. `early`: an encode
    /// ahead of its search (``ahead``).
    func encode(_ features: [Float], frames: Int, padding: Int, early: Bool = false) throws -> CrossAttention {
        let total = frames + padding
        let mel = try ORTValue.floats([1, mels, total]) { storage in
            storage.initialize(repeating: 0)
            for frame in 0..<frames {
                for bin in 0..<mels { storage[bin * total + frame] = features[frame * mels + bin] }
            }
        }
        let outputs = try computing(early ? ahead : compute) { try encoder.run([("mel", mel)], outputs: ["n_layer_cross_k", "n_layer_cross_v"]) }
        return try CrossAttention(encoded: outputs[0], values: outputs[1])
    }

    /// Runs `run` holding one of the model's `turns` (``compute`` unless said). Blocking.
    private func computing<T>(_ turns: DispatchSemaphore? = nil, _ run: () throws -> T) rethrows -> T {
        let turns = turns ?? compute
        turns.wait()
        defer { turns.signal() }
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
        let cache = cache ?? SelfAttentionCache(layers: layers, batch: batch, state: state, pool: storagePool)
        precondition(cache.batch == batch && cache.pending == nil, "a cache of \(cache.batch) sequences, stored, for \(batch)")
        let input = try ORTValue.int64s([batch, count], tokens.flatMap { $0.map(Int64.init) })
        var names = ["logits", "new_k", "new_v"]
        if attention { names.append("cross_attention_weights") }
        var inputs = [
            ("tokens", input),
            ("cross_frames", try ORTValue.int64s([cross.batch], cross.frames.map(Int64.init))),
            ("logit_positions", try ORTValue.int64s([positions.count], positions.map(Int64.init))),
        ]
        let past = try cache.layerViews()
        for layer in 0..<layers {
            inputs.append(("self_k_\(layer)", past.keys[layer]))
            inputs.append(("self_v_\(layer)", past.values[layer]))
            inputs.append(("cross_k_\(layer)", cross.keys[layer]))
            inputs.append(("cross_v_\(layer)", cross.values[layer]))
        }
        let outputs = try computing { try decoder.run(inputs, outputs: names) }
        return DecoderStep(logits: outputs[0], positions: positions, cache: cache.appending(keys: outputs[1], values: outputs[2], count: count),
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
    private static func gather(_ value: ORTValue, batch: Int, rows: [Int]) throws -> ORTValue {
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

/// The decoder's self-attention keys and values for the positions decoded so far: each layer's,
/// time-major (positions, sequences, state) after a placeholder row of zeros, as the decoder
/// takes them (`self_k_i`, `self_v_i`), in a ``SelfAttentionStorage`` with room to grow. A
/// decoder call's new positions are ``pending`` (its `new_k`/`new_v` outputs) until
/// ``reordered(_:)`` stores them with the sequences that go on. A value never changes: a cache
/// shared by several searches (a start tried at several temperatures) is appended to in place by
/// the first only; the others copy.
struct SelfAttentionCache: @unchecked Sendable {
    // @unchecked: the storage's positions below `stored` are never written again, and
    // ``SelfAttentionStorage/claim(from:to:)`` hands each position above to one writer.
    let layers: Int
    let batch: Int
    let state: Int
    /// Positions in ``storage``.
    let stored: Int
    let storage: SelfAttentionStorage?
    /// Positions a decoder call added, not stored yet: its (layers, count, batch, state) outputs.
    let pending: (keys: ORTValue, values: ORTValue, count: Int)?
    /// Where new storage comes from and goes back to.
    let pool: SelfAttentionStorage.Pool

    /// Positions in the cache.
    var length: Int { stored + (pending?.count ?? 0) }

    /// An empty cache.
    init(layers: Int, batch: Int, state: Int, pool: SelfAttentionStorage.Pool) {
        self.init(layers: layers, batch: batch, state: state, stored: 0, storage: nil, pending: nil, pool: pool)
    }

    private init(layers: Int, batch: Int, state: Int, stored: Int, storage: SelfAttentionStorage?,
                 pending: (keys: ORTValue, values: ORTValue, count: Int)?, pool: SelfAttentionStorage.Pool) {
        self.layers = layers
        self.batch = batch
        self.state = state
        self.stored = stored
        self.storage = storage
        self.pending = pending
        self.pool = pool
    }

    /// This cache with a decoder call's new positions after it.
    func appending(keys: ORTValue, values: ORTValue, count: Int) -> SelfAttentionCache {
        precondition(pending == nil, "a cache with positions not stored yet")
        return SelfAttentionCache(layers: layers, batch: batch, state: state, stored: stored, storage: storage, pending: (keys, values, count),
                                  pool: pool)
    }

    /// Each layer's keys and values, (1 + positions, sequences, state) views of the storage.
    func layerViews() throws -> (keys: [ORTValue], values: [ORTValue]) {
        guard let storage, stored > 0 else {
            let empty = try ORTValue.floats([1, batch, state]) { $0.initialize(repeating: 0) }
            return (Array(repeating: empty, count: layers), Array(repeating: empty, count: layers))
        }
        let shape = [1 + stored, batch, state]
        return (try (0..<layers).map { try ORTValue.view(of: storage.value, offset: storage.block($0), shape: shape) },
                try (0..<layers).map { try ORTValue.view(of: storage.value, offset: storage.block(layers + $0), shape: shape) })
    }

    /// The cache, all stored, with its sequences taken in `rows` order (the beams that survive a
    /// step). Unchanged rows append in place when the storage has room and no other value has
    /// written past this one; otherwise the rows are copied into storage with room to grow.
    func reordered(_ rows: [Int]) throws -> SelfAttentionCache {
        precondition(rows.allSatisfy { (0..<batch).contains($0) }, "rows \(rows) of \(batch) sequences")
        let total = length
        if rows.elementsEqual(0..<batch) {
            guard let pending else { return self }
            if let storage, storage.claim(from: stored, to: total) {
                copyPending(pending, rows: rows, into: storage, at: stored)
                return SelfAttentionCache(layers: layers, batch: batch, state: state, stored: total, storage: storage, pending: nil, pool: pool)
            }
        }
        let fresh = try pool.take(blocks: 2 * layers, positions: total, batch: rows.count, state: state)
        if let storage, stored > 0 {
            let source = storage.value.floats().baseAddress!, target = fresh.value.mutableFloats().baseAddress!
            for block in 0..<(2 * layers) {
                let from = storage.block(block), to = fresh.block(block)
                for position in 1...stored {
                    Self.copy(rows: rows, from: source + from + position * batch * state, to: target + to + position * rows.count * state, state: state)
                }
            }
        }
        if let pending { copyPending(pending, rows: rows, into: fresh, at: stored) }
        return SelfAttentionCache(layers: layers, batch: rows.count, state: state, stored: total, storage: fresh, pending: nil, pool: pool)
    }

    /// Writes the pending positions' `rows` into `storage` from position `start` on.
    private func copyPending(_ pending: (keys: ORTValue, values: ORTValue, count: Int), rows: [Int], into storage: SelfAttentionStorage,
                             at start: Int) {
        let target = storage.value.mutableFloats().baseAddress!
        for (kind, value) in [pending.keys, pending.values].enumerated() {
            let source = value.floats().baseAddress!
            for layer in 0..<layers {
                let to = storage.block(kind * layers + layer)
                for position in 0..<pending.count {
                    Self.copy(rows: rows, from: source + (layer * pending.count + position) * batch * state,
                              to: target + to + (1 + start + position) * rows.count * state, state: state)
                }
            }
        }
    }

    /// Row `rows[i]` of `source` to row i of `target` (rows of `state` floats), consecutive rows
    /// in one copy.
    private static func copy(rows: [Int], from source: UnsafePointer<Float>, to target: UnsafeMutablePointer<Float>, state: Int) {
        var index = 0
        while index < rows.count {
            var run = 1
            while index + run < rows.count && rows[index + run] == rows[index] + run { run += 1 }
            (target + index * state).update(from: source + rows[index] * state, count: run * state)
            index += run
        }
    }
}

/// Where a ``SelfAttentionCache`` keeps its positions: `blocks` (each layer's keys, then each
/// layer's values) of a placeholder row of zeros and `capacity` positions, each `batch`
/// sequences × `state`, so the placeholder and a block's first positions are a dense
/// (1 + positions, batch, state) tensor. Handed back to its pool when no cache holds it.
final class SelfAttentionStorage: @unchecked Sendable {
    // @unchecked: `filled` is guarded by `lock`; the floats are written only at positions a
    // `claim` handed out.
    let value: ORTValue
    /// Its blocks, positions, sequences and state: what the pool sorts it by.
    private let key: Pool.Key
    private let lock = NSLock()
    private var filled: Int
    private weak var pool: Pool?

    var capacity: Int { key.capacity }

    private init(value: ORTValue, key: Pool.Key, filled: Int, pool: Pool) {
        self.value = value
        self.key = key
        self.filled = filled
        self.pool = pool
    }

    deinit {
        pool?.give(value, key: key)
    }

    /// The element where block `index` starts.
    func block(_ index: Int) -> Int { index * (1 + key.capacity) * key.batch * key.state }

    /// Hands positions `start ..< end` to the caller if nothing was written past `start` and they fit.
    func claim(from start: Int, to end: Int) -> Bool {
        lock.withLock {
            guard filled == start, end <= key.capacity else { return false }
            filled = end
            return true
        }
    }

    /// Storage a model's decodes let go, kept to be taken again: a beam copies its cache into new
    /// storage at every step, and storage made afresh each time (megabytes, mapped and faulted in
    /// anew) cost more than the copy. Capacities are rounded up to ``granule`` positions so sizes
    /// repeat; the ``limit`` given back last are kept (taken again at the next step, they hold
    /// no more than the fresh storage would).
    final class Pool: @unchecked Sendable {
        // @unchecked: `free` is guarded by `lock`.
        struct Key: Hashable {
            var blocks, capacity, batch, state: Int
        }
        private let lock = NSLock()
        /// Oldest first.
        private var free: [(key: Key, value: ORTValue)] = []
        /// Positions capacities are rounded up to (a greedy decode appends in place until then).
        static let granule = 32
        /// Storage kept at most: one for each search that can run at once on a model.
        static let limit = 4

        /// Storage kept now.
        var kept: Int { lock.withLock { free.count } }

        /// Storage for `positions` stored positions (and room after them), its placeholders zero.
        func take(blocks: Int, positions: Int, batch: Int, state: Int) throws -> SelfAttentionStorage {
            let capacity = (positions / Self.granule + 1) * Self.granule
            let key = Key(blocks: blocks, capacity: capacity, batch: batch, state: state)
            let kept: ORTValue? = lock.withLock {
                guard let index = free.lastIndex(where: { $0.key == key }) else { return nil }
                return free.remove(at: index).value
            }
            let value = try kept ?? ORTValue.floats([blocks, 1 + capacity, batch, state]) { _ in }
            let storage = SelfAttentionStorage(value: value, key: key, filled: positions, pool: self)
            let floats = value.mutableFloats()
            for index in 0..<blocks { UnsafeMutableBufferPointer(rebasing: floats[storage.block(index)..<(storage.block(index) + batch * state)]).initialize(repeating: 0) }
            return storage
        }

        fileprivate func give(_ value: ORTValue, key: Key) {
            lock.withLock {
                free.append((key, value))
                if free.count > Self.limit { free.removeFirst() }
            }
        }
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
