import EarshotWire

/// At most `limit` sessions at once; sessions that ignore resource limits may go up to `hardLimit`.
struct Admission: Sendable {
    let limit: Int
    let hardLimit: Int

    /// Whether one more session may open when `open` are running.
    func admits(open: Int, ignoresResourceLimits: Bool) -> Bool {
        open < (ignoresResourceLimits ? hardLimit : limit)
    }
}

/// Opens waiting for a free slot, first come first served (Ollama's model: a busy server queues
/// before it refuses). Confined to the ``SpeechService`` actor.
struct AdmissionQueue {
    private var waiting: [(ticket: Int, continuation: CheckedContinuation<Void, any Error>)] = []
    private var nextTicket = 0
    /// Slots handed to woken waiters that have not yet started opening.
    private(set) var handedOver = 0

    var count: Int { waiting.count }

    /// A ticket for a waiter about to be queued.
    mutating func ticket() -> Int {
        defer { nextTicket += 1 }
        return nextTicket
    }

    mutating func enqueue(_ ticket: Int, _ continuation: CheckedContinuation<Void, any Error>) {
        waiting.append((ticket, continuation))
    }

    /// The first waiter, when `free` says a slot is free: it is handed the slot.
    mutating func wakeFirst(if free: Bool) {
        guard free, !waiting.isEmpty else { return }
        handedOver += 1
        waiting.removeFirst().continuation.resume()
    }

    /// A woken waiter took the slot it was handed.
    mutating func tookSlot() { handedOver -= 1 }

    /// Takes waiter `ticket` out of the queue (its client went away); false if it was woken.
    mutating func cancel(_ ticket: Int) -> Bool {
        guard let index = waiting.firstIndex(where: { $0.ticket == ticket }) else { return false }
        waiting.remove(at: index).continuation.resume(throwing: CancellationError())
        return true
    }
}
