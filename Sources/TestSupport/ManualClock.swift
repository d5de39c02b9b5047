import EarshotSystem
import Foundation

/// A ``ServiceClock`` that moves only when a test says so: sleepers wake when ``advance(by:)``
/// passes their deadline (in deadline order), and wall time moves by the same amount. Tests wait
/// for a loop to go to sleep with ``sleepers(atLeast:)`` instead of waiting for real time.
public final class ManualClock: ServiceClock, @unchecked Sendable {
    public struct Instant: InstantProtocol {
        /// Time since the clock was made.
        public var offset: Duration
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct Sleeper {
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct Watcher {
        var id: UUID
        var count: Int
        var continuation: CheckedContinuation<Void, Never>
    }

    private let lock = NSLock()
    private var current = Instant(offset: .zero)
    private let wallOrigin: Double
    private var sleeping: [UUID: Sleeper] = [:]
    private var watchers: [Watcher] = []
    private var requested: [Duration] = []

    /// A clock at `wallTime` Unix seconds.
    public init(wallTime: Double = 1_750_000_000) { wallOrigin = wallTime }

    public var now: Instant { lock.withLock { current } }
    public var minimumResolution: Duration { .nanoseconds(1) }
    public var elapsed: Duration { now.offset }

    public func wallTime() -> Double {
        let offset = now.offset.components
        return wallOrigin + Double(offset.seconds) + Double(offset.attoseconds) / 1e18
    }

    /// Every sleep asked for so far, as durations from the time of asking (backoff tests).
    public var requestedSleeps: [Duration] { lock.withLock { requested } }

    /// How many tasks are sleeping on this clock.
    public var sleeperCount: Int { lock.withLock { sleeping.count } }

    public func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        let id = UUID()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let (woken, resumeNow) = lock.withLock { () -> ([CheckedContinuation<Void, Never>], Bool) in
                    requested.append(current.duration(to: deadline))
                    if Task.isCancelled { return ([], true) }
                    if deadline <= current { return ([], true) }
                    sleeping[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return (takeSatisfiedWatchers(), false)
                }
                woken.forEach { $0.resume() }
                if resumeNow {
                    if Task.isCancelled { continuation.resume(throwing: CancellationError()) } else { continuation.resume() }
                }
            }
        } onCancel: {
            lock.withLock { sleeping.removeValue(forKey: id) }?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time (and wall time) forward by `duration`, waking every sleeper whose deadline has
    /// come, earliest first.
    public func advance(by duration: Duration) {
        let due = lock.withLock { () -> [Sleeper] in
            current = current.advanced(by: duration)
            let due = sleeping.filter { $0.value.deadline <= current }
            due.keys.forEach { sleeping[$0] = nil }
            return due.values.sorted { $0.deadline < $1.deadline }
        }
        due.forEach { $0.continuation.resume() }
    }

    /// Moves time forward by `seconds` (wall-time tests: grace periods, expiry).
    public func advance(_ seconds: Double) { advance(by: .seconds(seconds)) }

    /// Returns once at least `count` tasks sleep on this clock (no polling), or the waiting task
    /// is cancelled.
    public func sleepers(atLeast count: Int = 1) async {
        let id = UUID()
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = lock.withLock {
                    if sleeping.count >= count || Task.isCancelled { return true }
                    watchers.append(Watcher(id: id, count: count, continuation: continuation))
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            let watcher = lock.withLock { () -> Watcher? in
                guard let index = watchers.firstIndex(where: { $0.id == id }) else { return nil }
                return watchers.remove(at: index)
            }
            watcher?.continuation.resume()
        }
    }

    /// Removes and returns the watchers the current sleeper count satisfies (lock held).
    private func takeSatisfiedWatchers() -> [CheckedContinuation<Void, Never>] {
        let satisfied = watchers.filter { $0.count <= sleeping.count }
        watchers.removeAll { $0.count <= sleeping.count }
        return satisfied.map(\.continuation)
    }
}
