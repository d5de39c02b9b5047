import EarshotSystem

/// Why a download did not finish. The partial file and its sidecar stay in place for a resume,
/// except after ``tooLarge(limit:)`` (the bytes are not trusted).
public enum DownloadError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Every mirror failed; one entry per mirror, in request order, with its last failure.
    case allMirrorsFailed([MirrorFailure])
    /// The caller's `isCancelled` said so, or the task was cancelled.
    case cancelled
    /// The destination's file system lacks room for the rest of the file.
    case insufficientStorage(needed: Int64, available: Int64)
    /// Every mirror offered more bytes than the request's expected size.
    case tooLarge(limit: Int64)
    /// Reading or writing the destination failed.
    case io(SystemError)

    /// Whether no mirror could be reached: every failure is one worth trying again later
    /// (``MirrorFailure/Reason/isTransient``), nothing an admin must fix.
    public var isUnreachable: Bool {
        guard case .allMirrorsFailed(let failures) = self, !failures.isEmpty else { return false }
        return failures.allSatisfy(\.reason.isTransient)
    }

    public var description: String {
        switch self {
        case .allMirrorsFailed(let failures):
            failures.isEmpty ? "no download URLs" : "all mirrors failed: " + failures.map(\.description).joined(separator: "; ")
        case .cancelled: "download cancelled"
        case .insufficientStorage(let needed, let available): "insufficient storage: \(needed) bytes needed, \(available) available"
        case .tooLarge(let limit): "the server sent more than the expected \(limit) bytes"
        case .io(let error): "download I/O failed: \(error)"
        }
    }
}

/// How one mirror failed (its last attempt).
public struct MirrorFailure: Sendable, Hashable, CustomStringConvertible {
    public enum Reason: Sendable, Hashable, CustomStringConvertible {
        /// The server answered with this HTTP status.
        case httpStatus(Int)
        /// libcurl failed with this `CURLcode` and message (connection, TLS, file:, timeouts).
        case curl(code: Int, message: String)
        /// The transfer went slower than the low-speed limit for the low-speed time.
        case stalled
        /// The mirror offered more bytes than the request's expected size.
        case tooLarge

        /// Worth another attempt: name resolution, connecting, a connection that broke or timed
        /// out mid-way, a cut TLS handshake, a stall, 5xx, 408 and 429. Not: other 4xx, TLS
        /// verification, `file:` errors, too many bytes.
        public var isTransient: Bool {
            switch self {
            case .stalled: true
            case .httpStatus(let status): status >= 500 || status == 408 || status == 429
            case .curl(let code, _): Self.transientCurlCodes.contains(code)
            case .tooLarge: false
            }
        }

        private static let transientCurlCodes: Set<Int> = [
            5, 6, 7, // COULDNT_RESOLVE_PROXY, COULDNT_RESOLVE_HOST, COULDNT_CONNECT
            16, 92, // HTTP2, HTTP2_STREAM
            18, 28, 35, // PARTIAL_FILE, OPERATION_TIMEDOUT, SSL_CONNECT_ERROR
            52, 55, 56, // GOT_NOTHING, SEND_ERROR, RECV_ERROR
        ]

        public var description: String {
            switch self {
            case .httpStatus(let status): "HTTP \(status)"
            case .curl(let code, let message): "curl error \(code): \(message)"
            case .stalled: "stalled"
            case .tooLarge: "more bytes than expected"
            }
        }
    }

    public var url: String
    public var reason: Reason
    /// Attempts made on this mirror.
    public var attempts: Int

    public init(url: String, reason: Reason, attempts: Int) {
        self.url = url
        self.reason = reason
        self.attempts = attempts
    }

    public var description: String { "\(url): \(reason) (\(attempts) attempt\(attempts == 1 ? "" : "s"))" }
}
