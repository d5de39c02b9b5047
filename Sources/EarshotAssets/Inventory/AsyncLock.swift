/// A FIFO mutual-exclusion lock for critical sections that span `await` (an actor alone does not
/// serialise them: it is reentrant at every suspension). Waiters suspend on continuations, never
/// spin; the lock is not reentrant.
actor AsyncLock {
    private var held = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    /// Tasks waiting for the lock.
    var waiting: Int { waiters.count }

    /// Waits for the lock, in arrival order.
    func acquire() async {
        guard held else {
            held = true
            return
        }
        await withCheckedContinuation { waiters.append($0) }
    }

    /// Hands the lock to the longest waiter, or frees it.
    func release() {
        precondition(held, "AsyncLock released while not held")
        if waiters.isEmpty {
            held = false
        } else {
            waiters.removeFirst().resume()
        }
    }
}
