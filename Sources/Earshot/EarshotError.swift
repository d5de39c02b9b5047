import EarshotWire
import Foundation

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
    /// The daemon at `path` answered but has no connection slot for this client (it sent
    /// `insufficientResources` and closed): too many connections from this user or in total.
    /// Retrying later may work; starting another daemon will not help.
    case daemonBusy(path: String, message: String)
    /// The process listening at `path` runs as `uid`, which is neither root, this user nor the
    /// Earshot service user: it may be another user impersonating the daemon. Nothing was sent.
    case untrustedDaemon(path: String, uid: UInt32)
    /// The user socket's directory `path` is not this user's own (another owner, a symlink, or
    /// open to others): `reason` says which. Nothing was connected to.
    case untrustedSocketDirectory(path: String, reason: String)
    /// Audio this client cannot send (e.g. a sample rate that is not a whole number of Hz).
    case unsupportedAudioFormat(String)
    /// The modules have no compatible audio format yet: their assets are not installed (install
    /// them through ``AssetInventory`` first).
    case noCompatibleAudioFormat
    /// Custom language model data that Earshot refuses (what is wrong, and where).
    case invalidLanguageModelData(String)

    public var description: String {
        switch self {
        case .noDaemon(let tried):
            "no Earshot daemon answers (" + tried.map { "\($0.path): \($0.reason)" }.joined(separator: "; ") + ")"
        case .daemon(let error): error.message
        case .disconnected: "the Earshot daemon closed the connection"
        case .protocolViolation(let what): "unexpected reply from the Earshot daemon: \(what)"
        case .daemonBusy(let path, let message): "daemon busy: \(message) (\(path))"
        case .untrustedDaemon(let path, let uid): "the process at \(path) is owned by uid \(uid), not the Earshot daemon"
        case .untrustedSocketDirectory(_, let reason): "not connecting to the Earshot user socket: \(reason)"
        case .unsupportedAudioFormat(let what): "unsupported audio format: \(what)"
        case .noCompatibleAudioFormat: "no compatible audio format: the modules' assets are not installed (see AssetInventory.assetInstallationRequest(supporting:))"
        case .invalidLanguageModelData(let what): what
        }
    }

    /// The daemon's error code when the daemon refused the request (`unsupportedAudioFormat` also
    /// for audio refused before it was sent).
    public var code: ErrorCode? {
        switch self {
        case .daemon(let error): error.code
        case .daemonBusy: .insufficientResources
        case .unsupportedAudioFormat: .unsupportedAudioFormat
        default: nil
        }
    }
}
