import Foundation

/// Runs blocking work (file I/O, libcurl transfers, extraction, inference) on a dedicated thread and
/// bridges its result back to async code, so the cooperative pool never waits on it.
public enum BlockingWork {
    /// Runs `work` on a new thread named `name` and returns (or throws) its result.
    public static func run<T: Sendable>(_ name: String, _ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                continuation.resume(with: Result { try work() })
            }
            thread.name = name
            thread.start()
        }
    }

    /// Runs non-throwing `work` on a new thread named `name`.
    public static func run<T: Sendable>(_ name: String, _ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            let thread = Thread {
                continuation.resume(returning: work())
            }
            thread.name = name
            thread.start()
        }
    }
}
