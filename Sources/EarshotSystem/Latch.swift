import Foundation

/// Opened once, waited on by any number of tasks without polling: a service's shutdown began, a
/// download was cancelled. A waiting task that is cancelled returns.
public final class Latch: @unchecked Sendable {
    // @unchecked: `opened` and `waiters` are only touched while holding `lock`.
    private let lock = NSLock()
    private var opened = false
    private var waiters: [UUID: CheckedContinuation<Void, Never>] = [:]

    public init() {}

    public var isOpen: Bool { lock.withLock { opened } }

    /// Wakes every waiter, now and later.
    public func open() {
        let woken = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
            opened = true
            defer { waiters = [:] }
            return Array(waiters.values)
        }
        woken.forEach { $0.resume() }
    }

    /// Returns once the latch is open or the task is cancelled.
    public func wait() async {
        let id = UUID()
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = lock.withLock { () -> Bool in
                    if opened || Task.isCancelled { return true }
                    waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            lock.withLock { waiters.removeValue(forKey: id) }?.resume()
        }
    }
}
