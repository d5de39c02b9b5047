/// One file to fetch: where from (mirrors, tried in order) and where to put it.
public struct DownloadRequest: Sendable, Hashable {
    /// Mirror URLs in preference order (`http`, `https` or `file`).
    public var urls: [String]
    /// The partial/complete file in the cache directory. A sidecar `destination + ".meta"` records
    /// where the bytes came from so a later call can resume; both stay after completion (a repeat
    /// call then costs one request answered 416) until the caller removes them.
    public var destination: String
    /// The size the file must have, if known: used for the free-space check and to abort a server
    /// that sends more (``DownloadError/tooLarge(limit:)``).
    public var expectedSize: Int64?
    public var options: DownloadOptions
    /// What a mirror needs beyond its URL (a registry's authorization), by URL.
    public var access: [String: MirrorAccess]

    public init(urls: [String], destination: String, expectedSize: Int64? = nil, options: DownloadOptions = DownloadOptions(),
                access: [String: MirrorAccess] = [:]) {
        self.urls = urls
        self.destination = destination
        self.expectedSize = expectedSize
        self.options = options
        self.access = access
    }

    /// The sidecar that makes the partial file at ``destination`` resumable.
    public var metadataPath: String { PartialMetadata.path(for: destination) }
}

/// Request headers and redirect rules for one mirror, such as an OCI registry's blob URL with
/// its authorization. libcurl sends the headers to the mirror's own host only, never to a host it
/// redirects to. They are never logged or stored with the partial file.
public struct MirrorAccess: Sendable, Hashable {
    /// Whole header lines, e.g. `Authorization: Bearer …`.
    public var headers: [String]
    /// Protocols a redirect may switch to (`https`; `http,https` for a plain-HTTP mirror).
    public var redirectProtocols: String

    public init(headers: [String] = [], redirectProtocols: String = "http,https") {
        self.headers = headers
        self.redirectProtocols = redirectProtocols
    }
}

/// How hard to try and how fast to go.
public struct DownloadOptions: Sendable, Hashable {
    /// Attempts per mirror for transient failures (5xx, 408, 429, connection errors, stalls).
    public var maxAttemptsPerMirror: Int = 3
    /// Wait before the second attempt on a mirror; doubles with each further attempt.
    public var backoffBase: Duration = .milliseconds(500)
    /// Longest wait between attempts.
    public var backoffCap: Duration = .seconds(30)
    /// Time allowed to connect (and finish a TLS handshake).
    public var connectTimeout: Duration = .seconds(15)
    /// Stall detection: a transfer slower than this many bytes/s for ``lowSpeedTime`` is abandoned
    /// and retried (clamped to half of ``maxBytesPerSecond`` when a cap is set).
    public var lowSpeedLimit: Int = 1024
    /// See ``lowSpeedLimit``.
    public var lowSpeedTime: Duration = .seconds(30)
    /// Longest a single attempt may take; zero means no limit.
    public var totalTimeout: Duration = .zero
    /// Bandwidth cap in bytes/s (`CURLOPT_MAX_RECV_SPEED_LARGE`), e.g. for unattended updates.
    public var maxBytesPerSecond: Int64?
    /// A PEM file of CA certificates to trust instead of the system's (`CURLOPT_CAINFO`).
    public var caFile: String?
    /// Least time between two progress reports.
    public var progressInterval: Duration = .milliseconds(100)

    public init(maxAttemptsPerMirror: Int = 3, backoffBase: Duration = .milliseconds(500), backoffCap: Duration = .seconds(30),
                connectTimeout: Duration = .seconds(15), lowSpeedLimit: Int = 1024, lowSpeedTime: Duration = .seconds(30),
                totalTimeout: Duration = .zero, maxBytesPerSecond: Int64? = nil, caFile: String? = nil,
                progressInterval: Duration = .milliseconds(100)) {
        self.maxAttemptsPerMirror = maxAttemptsPerMirror
        self.backoffBase = backoffBase
        self.backoffCap = backoffCap
        self.connectTimeout = connectTimeout
        self.lowSpeedLimit = lowSpeedLimit
        self.lowSpeedTime = lowSpeedTime
        self.totalTimeout = totalTimeout
        self.maxBytesPerSecond = maxBytesPerSecond
        self.caFile = caFile
        self.progressInterval = progressInterval
    }

    /// The wait after failed attempt number `attempt` (1-based): base × 2^(attempt−1), capped.
    public func backoff(afterAttempt attempt: Int) -> Duration {
        var delay = backoffBase
        for _ in 1..<max(attempt, 1) {
            delay *= 2
            if delay >= backoffCap { return backoffCap }
        }
        return min(delay, backoffCap)
    }
}

/// Where a download stands. `bytesDone` counts bytes in the destination file, resumed ones included.
public struct DownloadProgress: Sendable, Hashable {
    public var bytesDone: Int64
    /// The full size, once the server (or the request's expected size) says.
    public var bytesTotal: Int64?

    public init(bytesDone: Int64, bytesTotal: Int64?) {
        self.bytesDone = bytesDone
        self.bytesTotal = bytesTotal
    }
}

/// A finished download.
public struct DownloadResult: Sendable, Hashable {
    /// Size of the complete file at the destination.
    public var bytes: Int64
    /// The mirror (as listed in the request) that served it.
    public var url: String
    /// The server's entity tag, if it sent one.
    public var etag: String?
    /// Bytes already in the destination that this call kept (0 when it started from scratch).
    public var resumedFrom: Int64
    /// Bytes this call received over the network in its successful attempt.
    public var bytesTransferred: Int64

    public init(bytes: Int64, url: String, etag: String?, resumedFrom: Int64, bytesTransferred: Int64) {
        self.bytes = bytes
        self.url = url
        self.etag = etag
        self.resumedFrom = resumedFrom
        self.bytesTransferred = bytesTransferred
    }
}
