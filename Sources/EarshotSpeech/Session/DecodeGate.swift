import Dispatch
import Foundation

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
