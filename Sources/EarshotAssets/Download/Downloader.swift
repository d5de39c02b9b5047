import EarshotSystem
import EarshotWire
import Foundation

/// Fetches files with libcurl: resumes partial files with HTTP ranges (validated by `If-Range` and
/// size), fails over between mirrors, retries transient failures with capped exponential backoff,
/// abandons stalled transfers, honours the proxy environment and an optional bandwidth cap.
/// Every transfer runs on its own thread (``BlockingWork``), never on the cooperative pool.
///
/// One destination must have one download at a time (the file is locked; a second concurrent call
/// fails with ``DownloadError/io(_:)`` `EWOULDBLOCK`): share a running download per asset instead.
public final class Downloader: Sendable {
    /// Sent as `User-Agent` with every HTTP request.
    public let userAgent: String
    private let clock: any ServiceClock

    /// `clock` paces the backoff between attempts and transfers under a bandwidth cap (the service's clock; a manual one in tests).
    public init(userAgent: String = "earshotd/\(EarshotVersion.string)", clock: any ServiceClock = SystemServiceClock()) {
        CurlGlobal.ensureInitialized()
        self.userAgent = userAgent
        self.clock = clock
    }

    /// Downloads `request` into its destination, resuming what an earlier call left there.
    ///
    /// Mirrors are tried in order: 404/410 (and other 4xx, TLS and `file:` errors) move to the next
    /// mirror at once; 5xx, 408, 429, connection errors, timeouts and stalls are retried with backoff
    /// up to `maxAttemptsPerMirror` times first. On cancellation (`isCancelled`, polled during the
    /// transfer, or Swift task cancellation) the partial file and its sidecar stay for a later resume.
    /// - Parameters:
    ///   - progress: called on the transfer thread, at most every `progressInterval`, and once at the end.
    ///   - cancellation: opened to cancel: the transfer thread checks it (about once a second when
    ///     idle, more when busy), a backoff between attempts ends at once.
    public func download(_ request: DownloadRequest,
                         progress: @escaping @Sendable (DownloadProgress) -> Void = { _ in },
                         cancellation: Latch = Latch()) async throws(DownloadError) -> DownloadResult {
        let outcome = await withTaskCancellationHandler {
            await self.run(request, progress: progress, cancellation: cancellation)
        } onCancel: {
            cancellation.open()
        }
        return try outcome.get()
    }

    /// Removes a partial (or complete) download and its sidecar.
    public func removePartial(_ destination: String) async throws(DownloadError) {
        let result: Result<Void, DownloadError> = await BlockingWork.run("earshot.download.remove") {
            do throws(SystemError) {
                try PartialMetadata.remove(PartialMetadata.path(for: destination))
                if unlink(destination) == -1, errno != ENOENT { throw SystemError("unlink(\(destination))", errno: errno) }
                return .success(())
            } catch {
                return .failure(.io(error))
            }
        }
        try result.get()
    }

    private func run(_ request: DownloadRequest, progress: @escaping @Sendable (DownloadProgress) -> Void,
                     cancellation: Latch) async -> Result<DownloadResult, DownloadError> {
        let shouldStop: @Sendable () -> Bool = { cancellation.isOpen }
        if shouldStop() { return .failure(.cancelled) }
        guard !request.urls.isEmpty else { return .failure(.allMirrorsFailed([])) }
        if let failure = await BlockingWork.run("earshot.download.check", { Self.checkSpace(request) }) {
            return .failure(failure)
        }

        var failures: [MirrorFailure] = []
        var tooLargeLimit: Int64?
        for url in request.urls {
            let plan = TransferPlan(url: url, destination: request.destination, expectedSize: request.expectedSize,
                                    options: request.options, userAgent: userAgent, access: request.access[url] ?? MirrorAccess(), clock: clock)
            var attempts = 0
            var restarts = 0
            mirror: while true {
                if shouldStop() { return .failure(.cancelled) }
                attempts += 1
                let outcome = await BlockingWork.run("earshot.download") {
                    CurlTransfer.run(plan, progress: progress, shouldStop: shouldStop)
                }
                let reason: MirrorFailure.Reason
                let retryable: Bool
                switch outcome {
                case .completed(let result):
                    return .success(result)
                case .cancelled:
                    return .failure(.cancelled)
                case .io(let error):
                    return .failure(.io(error))
                case .insufficientStorage(let needed, let available):
                    return .failure(.insufficientStorage(needed: needed, available: available))
                case .restart:
                    // The partial was discarded; a fresh request cannot restart again, but stay bounded.
                    attempts -= 1
                    restarts += 1
                    if restarts <= 2 { continue mirror }
                    reason = .curl(code: 36, message: "resuming kept failing: the file changed on the server") // BAD_DOWNLOAD_RESUME
                    retryable = false
                case .tooLarge(let limit):
                    tooLargeLimit = limit
                    reason = .tooLarge
                    retryable = false
                case .httpStatus(let status):
                    reason = .httpStatus(status)
                    retryable = reason.isTransient
                case .stalled:
                    reason = .stalled
                    retryable = true
                case .curl(let code, let message):
                    reason = .curl(code: code, message: message)
                    retryable = reason.isTransient
                }
                if retryable && attempts < request.options.maxAttemptsPerMirror {
                    guard await pause(request.options.backoff(afterAttempt: attempts), cancellation: cancellation) else {
                        return .failure(.cancelled)
                    }
                    continue mirror
                }
                failures.append(MirrorFailure(url: url, reason: reason, attempts: attempts))
                break mirror
            }
        }
        if let tooLargeLimit, failures.allSatisfy({ $0.reason == .tooLarge }) {
            return .failure(.tooLarge(limit: tooLargeLimit))
        }
        return .failure(.allMirrorsFailed(failures))
    }

    /// Free space first: with a known size, what is left to fetch must fit.
    private static func checkSpace(_ request: DownloadRequest) -> DownloadError? {
        guard let expected = request.expectedSize else { return nil }
        do throws(SystemError) {
            let metadata = PartialMetadata.load(request.metadataPath)
            let kept = try PartialFile.resumableBytes(destination: request.destination, metadata: metadata, expectedSize: expected)
            let available = try PartialFile.availableBytes(PartialFile.directory(of: request.destination))
            let needed = expected - kept
            return needed > available ? .insufficientStorage(needed: needed, available: available) : nil
        } catch {
            return .io(error)
        }
    }

    /// Waits `duration` on the injected clock; false as soon as `cancellation` opens or the task
    /// is cancelled.
    func pause(_ duration: Duration, cancellation: Latch) async -> Bool {
        if cancellation.isOpen || Task.isCancelled { return false }
        let clock = clock
        let slept = await withTaskGroup(of: Bool.self) { group in
            group.addTask { (try? await clock.sleep(for: duration)) != nil }
            group.addTask {
                await cancellation.wait()
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        return slept && !cancellation.isOpen && !Task.isCancelled
    }
}
