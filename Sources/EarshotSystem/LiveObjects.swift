import Foundation

/// Counts live instances of the objects a speech session owns (sessions, decoders, detectors,
/// resamplers), by kind. `earshot.stats` reports the counts, so leaks are visible in production and
/// tests can prove that a finished or abandoned session really was freed.
public enum LiveObjects {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var live: [String: Int] = [:]

    /// Call from an initializer once the object exists.
    public static func created(_ kind: String) {
        lock.withLock { live[kind, default: 0] += 1 }
    }

    /// Call from `deinit` (only for objects that counted themselves as created).
    public static func destroyed(_ kind: String) {
        lock.withLock { live[kind, default: 0] -= 1 }
    }

    /// Live objects by kind (kinds seen since start, zero counts included).
    public static var counts: [String: Int] { lock.withLock { live } }
}
