import Dispatch
import Foundation

/// The one time source a service's timer loops share: as a `Clock<Duration>` it paces sleeps,
/// backoff and intervals; ``elapsed`` measures intervals (throttling, linger deadlines); and
/// ``wallTime()`` dates what is stored (reservation expiry, GC grace periods). The daemon injects
/// ``SystemServiceClock``; tests inject a manual clock that moves all three together.
public protocol ServiceClock: Clock, Sendable where Duration == Swift.Duration {
    /// Monotonic time since the clock was made.
    var elapsed: Duration { get }
    /// Now, as Unix seconds.
    func wallTime() -> Double
    /// Calls `handler` on `queue` once `delay` has passed on this clock, unless cancelled first.
    func schedule(after delay: Duration, on queue: DispatchQueue, _ handler: @escaping @Sendable () -> Void) -> any ScheduledWake
}

/// The system's clocks: `ContinuousClock` for sleeping and intervals, `Date` for wall time.
public struct SystemServiceClock: ServiceClock {
    private let base = ContinuousClock()
    private let origin = ContinuousClock.now

    public init() {}

    public var now: ContinuousClock.Instant { base.now }
    public var minimumResolution: Duration { base.minimumResolution }
    public var elapsed: Duration { origin.duration(to: base.now) }

    public func sleep(until deadline: ContinuousClock.Instant, tolerance: Duration?) async throws {
        try await base.sleep(until: deadline, tolerance: tolerance)
    }

    public func wallTime() -> Double { Date().timeIntervalSince1970 }
}

/// A wake-up scheduled with ``ServiceClock/schedule(after:on:_:)``.
public protocol ScheduledWake: Sendable {
    /// Stops the wake-up if it has not fired (the handler may still run if it was already on
    /// its way: handlers re-check what they time).
    func cancel()
}

extension ServiceClock {
    /// Calls `handler` on `queue` once `delay` has passed on this clock (never earlier), unless
    /// cancelled first: the timers of Dispatch-driven code (sockets keep their state on a serial
    /// queue). This default sleeps on the clock in a task (a manual clock fires it when advanced).
    public func schedule(after delay: Duration, on queue: DispatchQueue, _ handler: @escaping @Sendable () -> Void) -> any ScheduledWake {
        // The deadline is fixed now: the task may start sleeping after the clock has moved on.
        let deadline = now.advanced(by: delay)
        return TaskWake(task: Task {
            try await sleep(until: deadline, tolerance: nil)
            queue.async(execute: handler)
        })
    }
}

extension SystemServiceClock {
    /// A Dispatch timer on `queue` (no task, no thread while it waits).
    public func schedule(after delay: Duration, on queue: DispatchQueue, _ handler: @escaping @Sendable () -> Void) -> any ScheduledWake {
        let source = DispatchSource.makeTimerSource(queue: queue)
        let nanoseconds = max(0, delay / .nanoseconds(1))
        source.schedule(deadline: .now() + .nanoseconds(Int(min(nanoseconds, Double(Int.max / 2)))))
        source.setEventHandler { // cancelling releases this handler, and with it the source
            source.cancel()
            handler()
        }
        source.resume()
        return DispatchWake(source: source)
    }
}

/// A wake-up that is a sleeping task.
private struct TaskWake: ScheduledWake {
    let task: Task<Void, any Error>
    func cancel() { task.cancel() }
}

/// A wake-up that is a one-shot Dispatch timer.
private struct DispatchWake: ScheduledWake, @unchecked Sendable {
    // @unchecked: DispatchSource's cancel is thread-safe.
    let source: any DispatchSourceTimer
    func cancel() { source.cancel() }
}
