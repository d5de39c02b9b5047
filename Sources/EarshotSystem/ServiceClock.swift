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
