import Foundation

/// Gathers work that arrives from several threads into batches. Batches run on threads of the
/// batcher's own, at most ``maxRunning`` at once, each started when work arrives and none is free
/// and ended when nothing waits: a runner takes everything waiting (at most ``maxBatch`` items,
/// oldest first), and what arrives while every runner is busy waits and goes together in a next
/// batch. A batch hands each item's result to its caller as soon as it has it, so no caller
/// waits for the rest of its batch. Callers block (they are the engine's decode threads, never
/// the cooperative pool).
final class DecodeBatcher<Item, Output>: @unchecked Sendable {
    // @unchecked: `waiting`, `finished`, `running` and `next` are guarded by `condition`.
    private let condition = NSCondition()
    private var waiting: [(ticket: Int, item: Item)] = []
    private var finished: [Int: Result<Output, any Error>] = [:]
    private var running = 0
    private var next = 0
    /// Items one batch takes.
    let maxBatch: Int
    /// Batches (runner threads) that may run at once.
    let maxRunning: Int
    /// The work: a batch, and the function that hands item i its result (once each).
    typealias Work = ([Item], _ deliver: (Int, Result<Output, any Error>) -> Void) -> Void
    private let work: Work
    private let waited: ((Int) -> Void)?

    /// `waited`, if given, hears how many items wait each time one arrives and has to.
    init(maxBatch: Int, maxRunning: Int = 1, waited: ((Int) -> Void)? = nil, work: @escaping Work) {
        self.maxBatch = max(1, maxBatch)
        self.maxRunning = max(1, maxRunning)
        self.waited = waited
        self.work = work
    }

    /// Runs `item` in a batch and returns its result. Blocking.
    func run(_ item: Item) throws -> Output {
        condition.lock()
        let ticket = next
        next += 1
        waiting.append((ticket, item))
        if running < maxRunning {
            running += 1
            let runner = Thread { [self] in runBatches() }
            runner.name = "earshot.engine-batch"
            runner.start()
        } else {
            waited?(waiting.count)
        }
        while finished[ticket] == nil { condition.wait() }
        let result = finished.removeValue(forKey: ticket)!
        condition.unlock()
        return try result.get()
    }

    /// A runner: batches until nothing waits.
    private func runBatches() {
        condition.lock()
        while !waiting.isEmpty {
            let batch = Array(waiting.prefix(maxBatch))
            waiting.removeFirst(batch.count)
            condition.unlock()
            var delivered = Set<Int>()
            work(batch.map(\.item)) { index, result in
                precondition(delivered.insert(index).inserted, "item \(index) of a batch delivered twice")
                condition.withLock {
                    finished[batch[index].ticket] = result
                    condition.broadcast()
                }
            }
            precondition(delivered.count == batch.count, "a batch of \(batch.count) delivered \(delivered.count) results")
            condition.lock()
        }
        running -= 1
        condition.unlock()
    }
}
