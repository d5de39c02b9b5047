import EarshotEngineLink
import EarshotWire
@testable import EarshotWhisper
import Foundation
import Testing
import TestSupport

/// Sessions' decodes batched on one model: the batch queue, and the same results batched as alone.
@Suite(.serialized) struct DecodeBatchTests {
    /// Decodes that arrive while a batch runs wait and go together in the next one, each with its
    /// own result (an item's failure is its own).
    @Test func decodesArrivingDuringABatchGoInTheNextTogether() async throws {
        let held = HeldFirstBatch(maxBatch: 4) { $0 == 2 ? .failure(BatchFailure()) : .success($0 * 10) }
        let callers = try held.startFirst()
        for item in 1...3 { held.startWaiting(item, callers) }
        held.release.signal()
        await callers.done()
        let results = callers.results
        #expect(held.log.batches == [[0], [1, 2, 3]])
        #expect(try results.get(0).get() == 0 && results.get(1).get() == 10 && results.get(3).get() == 30)
        #expect(throws: BatchFailure.self) { try results.get(2).get() }
    }

    /// A batch takes at most `maxBatch` items, oldest first; the rest wait for the next.
    @Test func aBatchTakesAtMostItsLimitOldestFirst() async throws {
        let held = HeldFirstBatch(maxBatch: 2)
        let callers = try held.startFirst()
        for item in 1...5 { held.startWaiting(item, callers) }
        held.release.signal()
        await callers.done()
        #expect(held.log.batches == [[0], [1, 2], [3, 4], [5]])
    }

    /// A batch hands each item its result as soon as it has it: the first item of a batch is
    /// back with its caller while the batch still works on the second.
    @Test func anItemsResultIsHandedOverBeforeItsBatchEnds() async throws {
        let oneBack = DispatchSemaphore(value: 0)
        let sawOneBack = Flag()
        let held = HeldFirstBatch(maxBatch: 2) { item in
            // Item 1's caller has its result before this batch goes on to item 2.
            if item == 1 { sawOneBack.set(oneBack.wait(timeout: .now() + 60) == .success) }
        }
        let callers = try held.startFirst()
        held.startWaiting(1, callers) { oneBack.signal() }
        held.startWaiting(2, callers)
        held.release.signal()
        await callers.done()
        #expect(sawOneBack.value)
    }

    /// With two batches allowed at once, a decode that arrives while one runs starts another at
    /// once instead of waiting for the first to end.
    @Test func aDecodeArrivingDuringABatchStartsAnotherAtOnce() async throws {
        let held = HeldFirstBatch(maxBatch: 4, maxRunning: 2)
        let callers = try held.startFirst()
        let second = await withCheckedContinuation { (done: CheckedContinuation<Int?, Never>) in
            Thread { done.resume(returning: try? held.batcher.run(1)) }.start()
        }
        #expect(second == 1)
        #expect(held.log.batches == [[0], [1]], "the second ran while the first was still held")
        held.release.signal()
        await callers.done()
    }

    /// A batch's keys and values are made once and each audio copied in, padded to the longest,
    /// as it is encoded; an audio's view of them reads the batch's storage, so holding the batch
    /// never holds an audio twice (the memory a model's concurrent decodes take).
    @Test func aBatchHoldsEachAudioOnceWithItsPaddingZero() throws {
        let (layers, state, heads) = (2, 4, 2), headState = state / heads
        // Audio a's value at (layer, index): distinct, never zero.
        func audio(_ a: Int, frames: Int) throws -> CrossAttention {
            let keys = try ORTValue.floats([layers, 1, state, frames]) { out in
                for index in out.indices { out[index] = Float(a * 100_000 + index + 1) }
            }
            let values = try ORTValue.floats([layers, 1, heads * frames, headState]) { out in
                for index in out.indices { out[index] = -Float(a * 100_000 + index + 1) }
            }
            return try CrossAttention(encoded: keys, values: values)
        }
        let long = try audio(1, frames: 5), short = try audio(2, frames: 3)
        var batch = try CrossAttentionBatch(audios: 2, longest: long)
        #expect(batch.place(long) == 0)
        #expect(batch.place(short) == 1)
        let placed = try batch.placed()
        #expect(placed.frames == [5, 3] && placed.audioFrames == 5 && placed.batch == 2)
        let alone = try batch.audio(1)
        #expect(alone.frames == [3] && alone.audioFrames == 5 && alone.batch == 1)
        for layer in 0..<layers {
            // Keys: each row of the short audio's, then zeros to the longest.
            let keys = alone.keys[layer].floats(), source = short.keys[layer].floats()
            for row in 0..<state {
                #expect(Array(keys[(row * 5)..<(row * 5 + 3)]) == Array(source[(row * 3)..<(row * 3 + 3)]))
                #expect(keys[(row * 5 + 3)..<(row * 5 + 5)].allSatisfy { $0 == 0 })
            }
            // Values: each head's frames, then zeros.
            let values = alone.values[layer].floats(), sourceValues = short.values[layer].floats()
            for head in 0..<heads {
                let to = head * 5 * headState, from = head * 3 * headState
                #expect(Array(values[to..<(to + 3 * headState)]) == Array(sourceValues[from..<(from + 3 * headState)]))
                #expect(values[(to + 3 * headState)..<(to + 5 * headState)].allSatisfy { $0 == 0 })
            }
            // The view is the batch's storage, not a copy.
            #expect(alone.keys[layer].floats().baseAddress == placed.keys[layer].floats().baseAddress! + state * 5)
        }
        // An audio that failed to encode leaves the batch with those placed.
        var partial = try CrossAttentionBatch(audios: 3, longest: long)
        _ = partial.place(long)
        #expect(try partial.placed().frames == [5])
    }

    /// The same audios decode to the same tokens, log probabilities and times batched as alone:
    /// five LibriVox clips of different lengths (the shorter padded to the longest, the padding
    /// masked), beam 5 and greedy (two groups of one batch), one with a prompt (a group of its own)
    /// and one identifying its language. Each row's quantization depends on that row alone, so
    /// another session's audio changes nothing of a result.
    @Test(.enabled(if: WhisperFixture.available, WhisperFixture.missing))
    func sessionsBatchedDecodeAsTheyDoAlone() throws {
        let decoder = try WhisperFixture.base()
        var decodes: [(samples: [Float], request: EngineWhisperDecode)] = []
        for (index, id) in LibriVox.ids.enumerated() {
            decodes.append((try LibriVox.samples(LibriVox.path(id)), WhisperFixture.request(beamSize: index == 4 ? 1 : 5)))
        }
        decodes.append((decodes[1].samples, WhisperFixture.request(beamSize: 1)))
        decodes.append((decodes[2].samples, WhisperFixture.request(prompt: "Marianne and Elinor Dashwood.")))
        var identify = WhisperFixture.request()
        identify.language = ""
        decodes.append((decodes[3].samples, identify))
        let batched = try decoder.decode(together: decodes)
        for (decode, together) in zip(decodes, batched) {
            let alone = try decoder.decode(decode.samples, decode.request)
            #expect(!alone.text.isEmpty)
            #expect(together.text == alone.text)
            #expect(together.tokenIDs == alone.tokenIDs)
            #expect(together.language == alone.language && together.languageProbability == alone.languageProbability)
            let worst = zip(together.logProbabilities ?? [], alone.logProbabilities ?? []).map { abs($0 - $1) }.max() ?? 0
            #expect(worst < 1e-5, "\(alone.text): log probabilities differ by \(worst)")
            #expect(together.starts == alone.starts && together.durations == alone.durations)
            #expect(together.noSpeechProbability == alone.noSpeechProbability)
        }
        print("batched as alone: \(batched.map(\.text))")
    }
}

private struct BatchFailure: Error {}

private final class Flag: @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    private let lock = NSLock()
    private var stored = false
    func set(_ value: Bool) { lock.withLock { stored = value } }
    var value: Bool { lock.withLock { stored } }
}

/// A batcher over fake work whose first batch, item 0 alone, is held until `release` is
/// signalled, so what arrives meanwhile waits; it records the batches it was given.
private final class HeldFirstBatch: @unchecked Sendable {
    // @unchecked: immutable once made; the log and the semaphores are thread-safe.
    let release = DispatchSemaphore(value: 0)
    let log = BatchLog()
    private let firstRunning = DispatchSemaphore(value: 0), arrived = DispatchSemaphore(value: 0)
    let batcher: DecodeBatcher<Int, Int>

    /// `result` gives an item's result; `delivered` runs after each item's was handed over.
    init(maxBatch: Int, maxRunning: Int = 1, result: @escaping @Sendable (Int) -> Result<Int, any Error> = { .success($0) },
         delivered: @escaping @Sendable (Int) -> Void = { _ in }) {
        let (log, firstRunning, release, arrived) = (log, firstRunning, release, arrived)
        batcher = DecodeBatcher(maxBatch: maxBatch, maxRunning: maxRunning, waited: { _ in arrived.signal() }) { items, deliver in
            log.record(items)
            if items == [0] {
                firstRunning.signal()
                release.wait()
            }
            for (index, item) in items.enumerated() {
                deliver(index, result(item))
                delivered(item)
            }
        }
    }

    convenience init(maxBatch: Int, delivered: @escaping @Sendable (Int) -> Void) {
        self.init(maxBatch: maxBatch, result: { .success($0) }, delivered: delivered)
    }

    /// Starts item 0's caller and returns once its batch runs (and holds).
    func startFirst() throws -> Callers {
        let callers = Callers(batcher)
        callers.start(0)
        firstRunning.wait()
        return callers
    }

    /// Starts `item`'s caller and returns once it waits (one at a time, so the order they wait in
    /// is known).
    func startWaiting(_ item: Int, _ callers: Callers, then: @escaping @Sendable () -> Void = {}) {
        callers.start(item, then: then)
        arrived.wait()
    }
}

/// The batches a fake work function was given.
private final class BatchLog: @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    private let lock = NSLock()
    private var recorded: [[Int]] = []
    func record(_ items: [Int]) { lock.withLock { recorded.append(items) } }
    var batches: [[Int]] { lock.withLock { recorded } }
}

/// Callers of a batcher, each on a thread of its own (as the engine's decode threads), and what
/// each got back.
private final class Callers: @unchecked Sendable {
    // @unchecked: `got` is guarded by `lock`; the rest is immutable.
    private let batcher: DecodeBatcher<Int, Int>
    private let group = DispatchGroup()
    private let lock = NSLock()
    private var got: [Int: Result<Int, any Error>] = [:]

    init(_ batcher: DecodeBatcher<Int, Int>) { self.batcher = batcher }

    /// Calls `run(item)` on a new thread; `then` runs on it once the call returned.
    func start(_ item: Int, then: @escaping @Sendable () -> Void = {}) {
        group.enter()
        Thread { [self] in
            let result = Result { try batcher.run(item) }
            lock.withLock { got[item] = result }
            then()
            group.leave()
        }.start()
    }

    /// Waits, without blocking the caller's thread, for every call to return.
    func done() async {
        await withCheckedContinuation { done in group.notify(queue: .global()) { done.resume() } }
    }

    var results: Results { Results(got: lock.withLock { got }) }

    struct Results {
        let got: [Int: Result<Int, any Error>]
        func get(_ item: Int) -> Result<Int, any Error> { got[item]! }
    }
}
