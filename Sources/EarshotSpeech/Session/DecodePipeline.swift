import Dispatch
import Foundation

/// Session events in the order the session produced them, though segment decodes finish out of
/// order: a decode reserves its place, and nothing after it is emitted before it is filled.
/// Confined to the session's queue.
final class OrderedEvents {
    private let emit: @Sendable (SessionEvent) -> Void
    /// Events waiting behind the oldest unfilled reservation (nil: reserved, not yet filled).
    private var pending: [[SessionEvent]?] = []
    /// Ticket of `pending[0]`.
    private var first = 0
    private var whenEmpty: [() -> Void] = []

    init(emit: @escaping @Sendable (SessionEvent) -> Void) { self.emit = emit }

    func send(_ event: SessionEvent) {
        if pending.isEmpty { emit(event) } else { pending.append([event]) }
    }

    /// A place for events that come later; fill it with ``fill(_:with:)``.
    func reserve() -> Int {
        pending.append(nil)
        return first + pending.count - 1
    }

    func fill(_ ticket: Int, with events: [SessionEvent]) {
        pending[ticket - first] = events
        while let head = pending.first, let events = head {
            pending.removeFirst()
            first += 1
            events.forEach(emit)
        }
        if pending.isEmpty {
            let waiting = whenEmpty
            whenEmpty = []
            waiting.forEach { $0() }
        }
    }

    /// Runs `body` once everything sent so far has been emitted (now, if it has).
    func whenEmitted(_ body: @escaping () -> Void) {
        if pending.isEmpty { body() } else { whenEmpty.append(body) }
    }
}

/// Bounds a session's segment decodes: at most `lanes` at once, each on its own lane (a serial
/// queue, so a blocked decode never holds a thread of a shared pool), holding at most `maxSamples`
/// of audio between those in flight and those reserved (a recording's window being gathered; one
/// decode is always admitted). `reserve` and `run` block: call them on the session's queue, never
/// the cooperative pool.
final class DecodeWindow: @unchecked Sendable {
    // Unchecked: state is guarded by `condition`; the queues are thread-safe.
    private let condition = NSCondition()
    private let queues: [DispatchQueue]
    private let maxSamples: Int
    private var free: [Int]
    private var heldSamples = 0

    init(label: String, lanes: Int, maxSamples: Int) {
        queues = (0..<max(1, lanes)).map { DispatchQueue(label: "\(label).\($0)") }
        free = Array(queues.indices.reversed())
        self.maxSamples = maxSamples
    }

    /// Waits until `samples` more fit within `maxSamples` (or nothing is held), then holds them
    /// for a decode to come: ``run(reserved:_:)`` runs it, ``unreserve(samples:)`` drops it.
    func reserve(samples: Int) {
        condition.withLock {
            while heldSamples > 0 && heldSamples + samples > maxSamples { condition.wait() }
            heldSamples += samples
        }
    }

    /// Waits for a lane, then runs `work` on it (its samples reserved); `work` must call `release`
    /// when its decode is done.
    func run(reserved samples: Int, _ work: @escaping @Sendable (_ lane: Int) -> Void) {
        let lane = condition.withLock {
            while free.isEmpty { condition.wait() }
            return free.removeLast()
        }
        queues[lane].async { work(lane) }
    }

    /// Waits for a lane, then transcribes `samples` (reserved) with `model` on it, gives the lane
    /// and the samples back and hands `done` the outcome, on the lane.
    func transcribe(_ samples: [Float], with model: any SegmentTranscribing,
                    then done: @escaping @Sendable (Result<Transcription, any Error>) -> Void) {
        perform(reserved: samples.count, { try model.transcribe(samples, sampleRate: Int(AnalysisSession.sampleRate)) }, then: done)
    }

    /// Waits for a lane, then runs `work` (decodes of `samples` reserved samples) on it, gives the
    /// lane and the samples back and hands `done` the outcome, on the lane.
    func perform<T: Sendable>(reserved samples: Int, _ work: @escaping @Sendable () throws -> T,
                              then done: @escaping @Sendable (Result<T, any Error>) -> Void) {
        run(reserved: samples) { [self] lane in
            let outcome = Result { try work() }
            release(lane: lane, samples: samples)
            done(outcome)
        }
    }

    func release(lane: Int, samples: Int) {
        condition.withLock {
            free.append(lane)
            heldSamples -= samples
            condition.broadcast()
        }
    }

    /// Gives back samples reserved for a decode that will not run.
    func unreserve(samples: Int) {
        condition.withLock {
            heldSamples -= samples
            condition.broadcast()
        }
    }

    /// Audio samples held by decodes in flight and reserved for coming ones.
    var samples: Int { condition.withLock { heldSamples } }
}

/// The daemon-wide bound on concurrent decodes (one per core), shared fairly between sessions: a
/// freed slot goes to the waiting decode of the session that holds the fewest slots (the earliest
/// among equals), so a long recording decoding segments in parallel never starves another session.
final class DecodeGate: @unchecked Sendable {
    // Unchecked: state is guarded by `condition`.
    private let condition = NSCondition()
    private var free: Int
    private var held: [String: Int] = [:]
    private var waiting: [(client: String, ticket: Int)] = []
    private var nextTicket = 0

    init(slots: Int) { free = max(1, slots) }

    /// Blocks until `client` may decode.
    func acquire(client: String) {
        condition.withLock {
            let ticket = nextTicket
            nextTicket += 1
            waiting.append((client, ticket))
            while free == 0 || Self.next(waiting, held: held) != ticket { condition.wait() }
            waiting.removeAll { $0.ticket == ticket }
            free -= 1
            held[client, default: 0] += 1
            if free > 0 { condition.broadcast() }
        }
    }

    func release(client: String) {
        condition.withLock {
            free += 1
            held[client, default: 1] -= 1
            if held[client] == 0 { held[client] = nil }
            condition.broadcast()
        }
    }

    /// The ticket to serve next: the waiter whose client holds the fewest slots, first come first.
    static func next(_ waiting: [(client: String, ticket: Int)], held: [String: Int]) -> Int? {
        waiting.min { (held[$0.client] ?? 0, $0.ticket) < (held[$1.client] ?? 0, $1.ticket) }?.ticket
    }
}
