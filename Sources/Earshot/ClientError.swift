import EarshotWire

/// Errors the client library reports.
public enum EarshotError: Error, Sendable, CustomStringConvertible {
    /// No daemon answered at any of the socket paths (path → reason).
    case noDaemon(tried: [(path: String, reason: String)])
    /// The daemon answered with an `error` event.
    case daemon(WireError)
    /// The connection closed before the reply arrived.
    case disconnected
    /// The daemon sent something this client does not understand.
    case protocolViolation(String)
    /// Audio this client cannot send (e.g. a sample rate that is not a whole number of Hz).
    case unsupportedAudioFormat(String)

    public var description: String {
        switch self {
        case .noDaemon(let tried):
            "no Earshot daemon answers (" + tried.map { "\($0.path): \($0.reason)" }.joined(separator: "; ") + ")"
        case .daemon(let error): error.message
        case .disconnected: "the Earshot daemon closed the connection"
        case .protocolViolation(let what): "unexpected reply from the Earshot daemon: \(what)"
        case .unsupportedAudioFormat(let what): "unsupported audio format: \(what)"
        }
    }

    /// The daemon's error code when the daemon refused the request (`unsupportedAudioFormat` also
    /// for audio refused before it was sent).
    public var code: ErrorCode? {
        switch self {
        case .daemon(let error): error.code
        case .unsupportedAudioFormat: .unsupportedAudioFormat
        default: nil
        }
    }
}
