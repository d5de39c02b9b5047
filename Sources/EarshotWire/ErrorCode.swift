/// Stable, append-only error codes carried in `error` events (`code`). Unknown codes from a newer
/// peer decode as themselves, so the list can grow without breaking old clients.
public struct ErrorCode: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(rawValue)
    }
    public var description: String { rawValue }

    /// The request is well-framed but its data is invalid for its type.
    public static let badRequest = ErrorCode(rawValue: "badRequest")
    /// The byte stream is not valid framing; the connection is closed after this error.
    public static let malformedFrame = ErrorCode(rawValue: "malformedFrame")
    /// The event type is not one the daemon handles; the connection stays open.
    public static let unknownEvent = ErrorCode(rawValue: "unknownEvent")
    /// The client asked for a protocol version the daemon does not speak.
    public static let unsupportedProtocolVersion = ErrorCode(rawValue: "unsupportedProtocolVersion")
    /// The peer is not allowed to do this (admin-only operation, someone else's reservation).
    public static let permissionDenied = ErrorCode(rawValue: "permissionDenied")
    /// The named thing does not exist.
    public static let notFound = ErrorCode(rawValue: "notFound")
    /// The client would exceed its reserved-locale quota.
    public static let quotaExceeded = ErrorCode(rawValue: "quotaExceeded")
    /// No catalog asset supports the requested locale for the module.
    public static let unsupportedLocale = ErrorCode(rawValue: "unsupportedLocale")
    /// The module's assets are supported but not installed.
    public static let notInstalled = ErrorCode(rawValue: "notInstalled")
    /// Too many concurrent analyses, connections or requests.
    public static let insufficientResources = ErrorCode(rawValue: "insufficientResources")
    /// Not enough free disk space for the download or install.
    public static let insufficientStorage = ErrorCode(rawValue: "insufficientStorage")
    /// A signature, hash or size check failed.
    public static let verificationFailed = ErrorCode(rawValue: "verificationFailed")
    /// A download failed on every mirror.
    public static let downloadFailed = ErrorCode(rawValue: "downloadFailed")
    /// The audio is not in a format the analyzer accepts.
    public static let unsupportedAudioFormat = ErrorCode(rawValue: "unsupportedAudioFormat")
    /// The operation was cancelled.
    public static let cancelled = ErrorCode(rawValue: "cancelled")
    /// The daemon is shutting down and takes no new work.
    public static let shuttingDown = ErrorCode(rawValue: "shuttingDown")
    /// A bug or an unexpected failure inside the daemon.
    public static let internalError = ErrorCode(rawValue: "internalError")

    /// Every code this version knows, in the order they were added.
    public static let known: [ErrorCode] = [
        .badRequest, .malformedFrame, .unknownEvent, .unsupportedProtocolVersion, .permissionDenied,
        .notFound, .quotaExceeded, .unsupportedLocale, .notInstalled, .insufficientResources,
        .insufficientStorage, .verificationFailed, .downloadFailed, .unsupportedAudioFormat,
        .cancelled, .shuttingDown, .internalError,
    ]
}

/// An error as the protocol carries it: a stable code and a human-readable message.
public struct WireError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: ErrorCode
    public var message: String
    public init(_ code: ErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }
    public var description: String { "\(message) (\(code))" }
}
