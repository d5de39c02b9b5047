import EarshotSystem
import EarshotWire
import Foundation

/// One consolidated install of one asset version, however many clients wait for it. Progress goes
/// to every registered sink (throttled); the outcome to every waiter. Thread-safe: the download
/// thread publishes progress directly.
final class InstallJob: @unchecked Sendable {
    let entry: CatalogAsset
    let bandwidthLimit: Int64?
    /// Update jobs are kept even when no reservation needs the asset.
    let isUpdate: Bool
    /// Who started it (`timer`, `uid 1000`, `uid 1000 app org.example.a`): named in the log line
    /// of the change it makes.
    let requestedBy: String
    var key: String { "\(entry.id)@\(entry.version)" }

    /// Paces progress (the service's clock).
    private let clock: any ServiceClock
    private let lock = NSLock()
    private var phase = InstallPhase.queued
    private var bytesDone: Int64 = 0
    private var lastPublished: Duration?
    private var sinks: [UUID: @Sendable (InstallProgress) -> Void] = [:]
    private var waiters: [UUID: CheckedContinuation<Void, any Error>] = [:]
    private var outcome: Result<Void, AssetError>?

    init(entry: CatalogAsset, bandwidthLimit: Int64?, isUpdate: Bool, requestedBy: String, clock: any ServiceClock) {
        self.entry = entry
        self.requestedBy = requestedBy
        self.clock = clock
        self.bandwidthLimit = bandwidthLimit
        self.isUpdate = isUpdate
    }

    /// Shortest time between two byte-count reports.
    static let progressInterval = Duration.milliseconds(100)

    /// Opened when the job is cancelled (its download waits on it).
    let cancellation = Latch()

    var isCancelled: Bool { cancellation.isOpen }

    /// Stops the job at its next check; the partial download stays for a later resume.
    func cancel() { cancellation.open() }

    /// Registers a progress sink; it gets the current state at once.
    func addSink(_ sink: @escaping @Sendable (InstallProgress) -> Void) -> UUID {
        let id = UUID()
        let snapshot = lock.withLock {
            sinks[id] = sink
            return progress
        }
        sink(snapshot)
        return id
    }

    func removeSink(_ id: UUID) { lock.withLock { _ = sinks.removeValue(forKey: id) } }

    /// Records progress; sinks hear about phase changes at once and byte counts at most every
    /// ``progressInterval`` of the job's clock.
    func publish(_ newPhase: InstallPhase, bytesDone done: Int64? = nil) {
        let (event, targets): (InstallProgress?, [@Sendable (InstallProgress) -> Void]) = lock.withLock {
            let phaseChanged = newPhase != phase
            phase = newPhase
            if let done { bytesDone = done }
            let now = clock.elapsed
            guard phaseChanged || lastPublished.map({ now - $0 >= Self.progressInterval }) ?? true else { return (nil, []) }
            lastPublished = now
            return (progress, Array(sinks.values))
        }
        if let event { targets.forEach { $0(event) } }
    }

    private var progress: InstallProgress {
        InstallProgress(id: nil, asset: entry.id, version: entry.version, phase: phase, bytesDone: bytesDone, bytesTotal: entry.size)
    }

    /// Waits for the outcome; the caller's cancellation ends only its own wait, not the job.
    func wait() async throws {
        let id = UUID()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                lock.withLock {
                    if let outcome {
                        continuation.resume(with: outcome.mapError { $0 as any Error })
                    } else {
                        waiters[id] = continuation
                    }
                }
            }
        } onCancel: {
            lock.withLock { waiters.removeValue(forKey: id) }?.resume(throwing: CancellationError())
        }
    }

    /// Records the outcome and wakes every waiter.
    func finish(_ result: Result<Void, AssetError>) {
        let pending = lock.withLock {
            outcome = result
            defer { waiters = [:] }
            return Array(waiters.values)
        }
        switch result {
        case .success: publish(.installed)
        case .failure(.cancelled): publish(.cancelled)
        case .failure: publish(.failed)
        }
        pending.forEach { $0.resume(with: result.mapError { $0 as any Error }) }
    }
}
