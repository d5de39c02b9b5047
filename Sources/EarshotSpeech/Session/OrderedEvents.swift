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
