import CCurl
import EarshotSystem
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `curl_global_init` must run once before any handle exists; a Swift static runs it exactly once,
/// thread-safely.
enum CurlGlobal {
    private static let initialized: CURLcode = curl_global_init(Int(CURL_GLOBAL_ALL))

    static func ensureInitialized() { _ = initialized }
}

/// What one attempt against one mirror needs to know.
struct TransferPlan: Sendable {
    var url: String
    var destination: String
    var expectedSize: Int64?
    var options: DownloadOptions
    var userAgent: String
    /// The mirror's extra headers and redirect rules.
    var access = MirrorAccess()
    /// Paces the transfer under a bandwidth cap (the service's clock; a manual one in tests).
    var clock: any ServiceClock
}

/// How one attempt ended, as the mirror loop sees it.
enum AttemptOutcome: Sendable {
    case completed(DownloadResult)
    case cancelled
    /// The partial no longer matches the source (and was discarded): try again from zero at once.
    case restart
    case httpStatus(Int)
    case curl(code: Int, message: String)
    case stalled
    case tooLarge(limit: Int64)
    case insufficientStorage(needed: Int64, available: Int64)
    case io(SystemError)
}

/// One libcurl easy transfer of one mirror into the destination file. Runs entirely on the
/// calling (dedicated) thread: open and lock the destination, decide the resume offset, perform,
/// fsync, close. libcurl calls back into ``receive(_:)`` and ``tick()`` on the same thread.
final class CurlTransfer {
    private enum Mode { case append, truncate, discard }

    private let plan: TransferPlan
    private let progress: @Sendable (DownloadProgress) -> Void
    private let shouldStop: @Sendable () -> Bool
    private let metadataPath: String
    private let isFile: Bool
    private var handle: UnsafeMutableRawPointer?
    private var fd: Int32 = -1
    private var stored: PartialMetadata?
    /// Bytes kept from an earlier attempt, asked for with `Range: bytes=offset-`.
    private var offset: Int64 = 0

    private var started = false
    private var mode = Mode.truncate
    private var failure: AttemptOutcome?
    private var cancelled = false
    /// Bytes in the destination so far (the next write position).
    private var position: Int64 = 0
    private var total: Int64?
    private var etag: String?
    private var unsynced: Int64 = 0
    private var dirty = false
    private var lastReport: ContinuousClock.Instant?
    private var lastReported: Int64 = -1
    /// When this attempt started (on the plan's clock) and how many body bytes it received (for
    /// the bandwidth cap).
    private var paceStart = Duration.zero
    private var received: Int64 = 0
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)

    /// Where pacing wake-ups are delivered (they only signal the waiting transfer thread).
    private static let paceQueue = DispatchQueue(label: "earshot.download.pace")
    /// Written data is flushed with `fdatasync` this often, so a crash loses little of a long transfer.
    private static let syncInterval: Int64 = 64 << 20
    /// libcurl's receive buffer: fewer, larger callbacks on fast links; smaller under a bandwidth
    /// cap so one callback is a small slice of a second's budget.
    private var bufferSize: Int {
        guard let cap = plan.options.maxBytesPerSecond, cap > 0 else { return 512 << 10 }
        return Int(min(max(cap / 16, 16 << 10), 512 << 10))
    }

    private init(_ plan: TransferPlan, progress: @escaping @Sendable (DownloadProgress) -> Void, shouldStop: @escaping @Sendable () -> Bool) {
        self.plan = plan
        self.progress = progress
        self.shouldStop = shouldStop
        metadataPath = PartialMetadata.path(for: plan.destination)
        isFile = plan.url.lowercased().hasPrefix("file:")
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
    }

    deinit {
        if let handle { curl_easy_cleanup(handle) }
        if fd >= 0 { close(fd) }
        errorBuffer.deallocate()
    }

    /// Runs one attempt; blocking, so call it on a ``BlockingWork`` thread.
    static func run(_ plan: TransferPlan, progress: @escaping @Sendable (DownloadProgress) -> Void, shouldStop: @escaping @Sendable () -> Bool) -> AttemptOutcome {
        let transfer = CurlTransfer(plan, progress: progress, shouldStop: shouldStop)
        do {
            return try transfer.perform()
        } catch {
            transfer.finishFile()
            return .io(error)
        }
    }

    // MARK: - The attempt

    private func perform() throws(SystemError) -> AttemptOutcome {
        let name = plan.destination
        fd = try systemCall("open(\(name))") { open(name, O_RDWR | O_CREAT | O_CLOEXEC, 0o644) }
        // Two transfers into one file would interleave: refuse rather than corrupt.
        try systemCall("flock(\(name))") { flock(fd, LOCK_EX | LOCK_NB) }
        stored = PartialMetadata.load(metadataPath)
        offset = try PartialFile.resumableBytes(destination: name, metadata: stored, expectedSize: plan.expectedSize)
        position = offset

        guard let easy = curl_easy_init() else { return .curl(code: Int(CURLE_FAILED_INIT.rawValue), message: "curl_easy_init failed") }
        handle = easy
        var headers: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(headers) }
        if let setupFailure = configure(easy, headers: &headers) { return setupFailure }

        let began = ContinuousClock.now
        paceStart = plan.clock.elapsed
        let code = curl_easy_perform(easy)
        let elapsed = ContinuousClock.now - began

        if code == CURLE_OK, !started, failure == nil {
            // An empty body never reaches the write callback: judge the response now.
            _ = begin()
        }
        if cancelled || (code == CURLE_ABORTED_BY_CALLBACK && failure == nil) {
            finishFile()
            return .cancelled
        }
        if let failure {
            finishFile()
            return failure
        }
        if code != CURLE_OK {
            let outcome = try classify(code, elapsed: elapsed)
            finishFile()
            return outcome
        }
        if mode == .discard {
            return try rangeNotSatisfiable()
        }
        if let total, position != total {
            finishFile()
            return .curl(code: Int(CURLE_PARTIAL_FILE.rawValue), message: "transfer ended at \(position) of \(total) bytes")
        }
        try systemCall("fsync(\(name))") { fsync(fd) }
        dirty = false
        report(force: true)
        let resumedFrom = mode == .append ? offset : 0
        return .completed(DownloadResult(bytes: position, url: plan.url, etag: etag, resumedFrom: resumedFrom, bytesTransferred: position - resumedFrom))
    }

    /// Sets every option; returns a failure if libcurl refuses one.
    private func configure(_ easy: UnsafeMutableRawPointer, headers: inout UnsafeMutablePointer<curl_slist>?) -> AttemptOutcome? {
        let options = plan.options
        let me = Unmanaged.passUnretained(self).toOpaque()
        var lowSpeedLimit = options.lowSpeedLimit
        if let cap = options.maxBytesPerSecond { lowSpeedLimit = min(lowSpeedLimit, Int(max(cap / 2, 1))) }
        var results: [(String, CURLcode)] = [
            ("URL", CCurl_easy_setopt_string(easy, CURLOPT_URL, plan.url)),
            ("PROTOCOLS_STR", CCurl_easy_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "http,https,file")),
            // A server must not redirect us to a local file.
            ("REDIR_PROTOCOLS_STR", CCurl_easy_setopt_string(easy, CURLOPT_REDIR_PROTOCOLS_STR, plan.access.redirectProtocols)),
            ("FOLLOWLOCATION", CCurl_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 1)),
            ("MAXREDIRS", CCurl_easy_setopt_long(easy, CURLOPT_MAXREDIRS, 5)),
            ("FAILONERROR", CCurl_easy_setopt_long(easy, CURLOPT_FAILONERROR, 0)),
            ("NOSIGNAL", CCurl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)),
            ("USERAGENT", CCurl_easy_setopt_string(easy, CURLOPT_USERAGENT, plan.userAgent)),
            ("FILETIME", CCurl_easy_setopt_long(easy, CURLOPT_FILETIME, 1)),
            ("TCP_KEEPALIVE", CCurl_easy_setopt_long(easy, CURLOPT_TCP_KEEPALIVE, 1)),
            ("BUFFERSIZE", CCurl_easy_setopt_long(easy, CURLOPT_BUFFERSIZE, bufferSize)),
            ("CONNECTTIMEOUT_MS", CCurl_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Self.milliseconds(options.connectTimeout))),
            ("LOW_SPEED_LIMIT", CCurl_easy_setopt_long(easy, CURLOPT_LOW_SPEED_LIMIT, lowSpeedLimit)),
            ("LOW_SPEED_TIME", CCurl_easy_setopt_long(easy, CURLOPT_LOW_SPEED_TIME, max(1, Self.milliseconds(options.lowSpeedTime) / 1000))),
            ("TIMEOUT_MS", CCurl_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, Self.milliseconds(options.totalTimeout))),
            ("ERRORBUFFER", CCurl_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer)),
            ("WRITEFUNCTION", CCurl_easy_setopt_write(easy, CURLOPT_WRITEFUNCTION, curlWriteBody)),
            ("WRITEDATA", CCurl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, me)),
            ("XFERINFOFUNCTION", CCurl_easy_setopt_xferinfo(easy, CURLOPT_XFERINFOFUNCTION, curlTransferInfo)),
            ("XFERINFODATA", CCurl_easy_setopt_pointer(easy, CURLOPT_XFERINFODATA, me)),
            ("NOPROGRESS", CCurl_easy_setopt_long(easy, CURLOPT_NOPROGRESS, 0)),
        ]
        if let cap = options.maxBytesPerSecond, cap > 0 {
            results.append(("MAX_RECV_SPEED_LARGE", CCurl_easy_setopt_off(easy, CURLOPT_MAX_RECV_SPEED_LARGE, curl_off_t(cap))))
        }
        if let caFile = options.caFile {
            results.append(("CAINFO", CCurl_easy_setopt_string(easy, CURLOPT_CAINFO, caFile)))
        }
        // A custom Authorization header: libcurl does not pass it on to another host on a redirect.
        for header in plan.access.headers { headers = curl_slist_append(headers, header) }
        if offset > 0 {
            results.append(("RANGE", CCurl_easy_setopt_string(easy, CURLOPT_RANGE, "\(offset)-")))
            // Only the same version of the file may be continued: otherwise the server sends it whole.
            if !isFile, let validator = stored?.ifRangeValidator {
                headers = curl_slist_append(headers, "If-Range: \(validator)")
            }
        }
        if headers != nil { results.append(("HTTPHEADER", CCurl_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, headers))) }
        // Proxy variables (http_proxy, https_proxy, no_proxy) stay honoured: libcurl's default.
        if let (option, code) = results.first(where: { $0.1 != CURLE_OK }) {
            return .curl(code: Int(code.rawValue), message: "curl_easy_setopt(CURLOPT_\(option)): " + String(cString: curl_easy_strerror(code)))
        }
        return nil
    }

    private static func milliseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        return Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000)
    }

    // MARK: - Callbacks (on the transfer thread)

    /// The first bytes (or the end) of a response: judge status and validators, record them in the
    /// sidecar, and set the file up for appending or starting over. False aborts the transfer.
    private func begin() -> Bool {
        started = true
        let status = infoLong(CURLINFO_RESPONSE_CODE)
        let length = infoOff(CURLINFO_CONTENT_LENGTH_DOWNLOAD_T)
        var lastModified: String?
        if isFile {
            // file: honours ranges; its validators are the source's size and mtime.
            let mtime = infoOff(CURLINFO_FILETIME_T)
            lastModified = mtime >= 0 ? String(mtime) : nil
            total = length >= 0 ? offset + length : nil
            if offset > 0 {
                guard stored?.lastModified == lastModified, stored?.totalSize == total else { return restart() }
                mode = .append
            } else {
                mode = .truncate
            }
        } else {
            etag = header("ETag")
            lastModified = header("Last-Modified")
            switch status {
            case 206 where offset > 0:
                let range = Self.contentRange(header("Content-Range"))
                total = range.total ?? (length >= 0 ? offset + length : nil)
                guard range.start == offset else { return restart() }
                if let known = stored?.totalSize, known != total { return restart() }
                mode = .append
            case 200:
                total = length >= 0 ? length : nil
                mode = .truncate
            case 416 where offset > 0:
                mode = .discard
                return true
            default:
                failure = .httpStatus(status)
                return false
            }
        }
        if let limit = plan.expectedSize, let total, total > limit {
            failure = .tooLarge(limit: limit)
            return false
        }
        do {
            if mode == .truncate {
                try discardPartial()
            }
            if let total {
                let available = try PartialFile.availableBytes(fd: fd, name: plan.destination)
                if total - position > available {
                    failure = .insufficientStorage(needed: total - position, available: available)
                    return false
                }
            }
            let metadata = PartialMetadata(url: plan.url, etag: etag, lastModified: lastModified, totalSize: total)
            if metadata != stored {
                try metadata.store(metadataPath)
                stored = metadata
            }
        } catch {
            failure = .io(error)
            return false
        }
        return true
    }

    /// Body bytes from libcurl. False aborts the transfer.
    fileprivate func receive(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if !started, !begin() { return false }
        if mode == .discard { return true }
        let count = Int64(bytes.count)
        if let limit = plan.expectedSize, position + count > limit {
            // No length was announced and the body ran past the limit: these bytes are not trusted.
            failure = .tooLarge(limit: limit)
            try? discardPartial()
            return false
        }
        do {
            try PartialFile.writeAll(fd, bytes, at: position, name: plan.destination)
            position += count
            received += count
            dirty = true
            unsynced += count
            if unsynced >= Self.syncInterval {
                try systemCall("fdatasync(\(plan.destination))") { fdatasync(fd) }
                unsynced = 0
            }
        } catch {
            failure = .io(error)
            return false
        }
        return pace()
    }

    /// Holds the transfer back while it is ahead of the bandwidth cap. libcurl's own limiter
    /// (`CURLOPT_MAX_RECV_SPEED_LARGE`, also set) lets a burst through when a whole socket buffer is
    /// waiting; sleeping here, on the transfer's own thread, stops reading so TCP slows the sender.
    /// False when cancelled meanwhile.
    private func pace() -> Bool {
        guard let cap = plan.options.maxBytesPerSecond, cap > 0 else { return true }
        let clock = plan.clock
        let due = paceStart + .seconds(Double(received) / Double(cap))
        while clock.elapsed < due {
            if shouldStop() {
                cancelled = true
                return false
            }
            // At most 100 ms at a time, so a cancellation is noticed.
            let woken = DispatchSemaphore(value: 0)
            _ = clock.schedule(after: min(due - clock.elapsed, .milliseconds(100)), on: Self.paceQueue) { woken.signal() }
            woken.wait()
        }
        report(force: false)
        return true
    }

    /// libcurl's periodic callback: poll cancellation and report progress. False aborts.
    fileprivate func tick() -> Bool {
        if shouldStop() {
            cancelled = true
            return false
        }
        report(force: false)
        return true
    }

    private func report(force: Bool) {
        guard position != lastReported else { return }
        let now = ContinuousClock.now
        if !force, let lastReport, now - lastReport < plan.options.progressInterval { return }
        lastReport = now
        lastReported = position
        progress(DownloadProgress(bytesDone: position, bytesTotal: total ?? plan.expectedSize))
    }

    // MARK: - Outcomes

    /// A 416 to our range: complete when the server's size is exactly what we hold, else start over.
    private func rangeNotSatisfiable() throws(SystemError) -> AttemptOutcome {
        let serverTotal = Self.contentRange(header("Content-Range")).total
        let known = serverTotal ?? stored?.totalSize ?? plan.expectedSize
        guard let known, known == offset else {
            try discardPartial()
            finishFile()
            return .restart
        }
        try systemCall("fsync(\(plan.destination))") { fsync(fd) }
        report(force: true)
        return .completed(DownloadResult(bytes: offset, url: plan.url, etag: stored?.etag, resumedFrom: offset, bytesTransferred: 0))
    }

    /// The source changed under a partial: drop it and let the mirror loop start over.
    private func restart() -> Bool {
        do {
            try discardPartial()
            failure = .restart
        } catch {
            failure = .io(error)
        }
        return false
    }

    /// Empties the destination, removing the sidecar first so it never describes other bytes.
    private func discardPartial() throws(SystemError) {
        try PartialMetadata.remove(metadataPath)
        stored = nil
        try systemCall("ftruncate(\(plan.destination))") { ftruncate(fd, 0) }
        position = 0
        dirty = true
    }

    private func classify(_ code: CURLcode, elapsed: Duration) throws(SystemError) -> AttemptOutcome {
        let message = errorBuffer.pointee != 0 ? String(cString: errorBuffer) : String(cString: curl_easy_strerror(code))
        switch code {
        case CURLE_OPERATION_TIMEDOUT:
            let connected = infoOff(CURLINFO_CONNECT_TIME_T) > 0 || infoLong(CURLINFO_RESPONSE_CODE) != 0
            let totalLimitHit = plan.options.totalTimeout > .zero && elapsed >= plan.options.totalTimeout
            if connected && !totalLimitHit { return .stalled }
        case CURLE_BAD_DOWNLOAD_RESUME where isFile && offset > 0:
            // The source is now shorter than our partial.
            try discardPartial()
            return .restart
        default:
            break
        }
        return .curl(code: Int(code.rawValue), message: message)
    }

    /// Makes what was written durable (a partial stays resumable) and releases the file.
    private func finishFile() {
        guard fd >= 0 else { return }
        if dirty { _ = fsync(fd) }
        close(fd)
        fd = -1
    }

    // MARK: - libcurl queries

    private func infoLong(_ info: CURLINFO) -> Int {
        var value = 0
        return CCurl_easy_getinfo_long(handle, info, &value) == CURLE_OK ? value : 0
    }

    private func infoOff(_ info: CURLINFO) -> Int64 {
        var value: curl_off_t = -1
        return CCurl_easy_getinfo_off(handle, info, &value) == CURLE_OK ? Int64(value) : -1
    }

    /// The first value of response header `name` of the last request (after redirects).
    private func header(_ name: String) -> String? { CurlHeader.first(handle, name) }

    /// `bytes START-END/TOTAL` or `bytes */TOTAL` → (START, TOTAL); nil parts when absent or `*`.
    static func contentRange(_ value: String?) -> (start: Int64?, total: Int64?) {
        guard let value else { return (nil, nil) }
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        guard trimmed.lowercased().hasPrefix("bytes") else { return (nil, nil) }
        let spec = trimmed.dropFirst(5).trimmingCharacters(in: .whitespaces)
        let parts = spec.split(separator: "/", maxSplits: 1)
        guard parts.count == 2 else { return (nil, nil) }
        let start = parts[0].split(separator: "-", maxSplits: 1).first.flatMap { Int64($0) }
        return (start, Int64(parts[1]))
    }
}

/// `CURLOPT_WRITEFUNCTION`: hands body bytes to the transfer; a short count aborts with
/// `CURLE_WRITE_ERROR` (the transfer records why).
private let curlWriteBody: curl_write_callback = { data, size, count, context in
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue()
    let length = size * count
    return transfer.receive(UnsafeRawBufferPointer(start: data, count: length)) ? length : 0
}

/// `CURLOPT_XFERINFOFUNCTION`: non-zero aborts with `CURLE_ABORTED_BY_CALLBACK`.
private let curlTransferInfo: curl_xferinfo_callback = { context, _, _, _, _ in
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue()
    return transfer.tick() ? 0 : 1
}
