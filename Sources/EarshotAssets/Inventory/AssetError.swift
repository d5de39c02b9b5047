import EarshotSystem
import Foundation

/// Failures of asset operations (the daemon's `ErrorMap` gives each its wire code).
public enum AssetError: Error, Sendable, CustomStringConvertible {
    case unsupportedLocale(String)
    case unsupportedModule(String)
    case quotaExceeded(maximum: Int, wanted: [String])
    /// The user's reservations across all its app ids are at their cap (`MaxReservedLocalesPerUser`,
    /// `MaxAppsPerUser`).
    case userQuotaExceeded(String)
    case notFound(String)
    case notInstalled(String)
    case permissionDenied(String)
    case verificationFailed(String)
    case downloadFailed(String)
    case insufficientStorage(needed: Int64, available: Int64, path: String)
    case cancelled(String)
    /// The asset is held at `version` (``AssetService/hold(_:requestedBy:)``); unhold it first.
    case held(asset: String, version: Int)
    case inconsistentState(String)
    case internalError(String)
    /// Custom language model data the daemon refuses (what is wrong, and where).
    case invalidLanguageModel(String)
    /// The app already keeps `maximum` prepared custom language models.
    case languageModelQuotaExceeded(client: ClientIdentity, maximum: Int)

    public var description: String {
        switch self {
        case .unsupportedLocale(let l): "no catalog asset supports locale \(l)"
        case .unsupportedModule(let m): "no catalog asset can serve \(m)"
        case .quotaExceeded(let max, let wanted): "reserving \(wanted.joined(separator: ", ")) would exceed this app's maximum of \(max) reserved locales; release one first"
        case .userQuotaExceeded(let why): why
        case .notFound(let what): "\(what) not found"
        case .notInstalled(let what): "\(what) is supported but not installed; install it first"
        case .permissionDenied(let what): what
        case .verificationFailed(let what): what
        case .downloadFailed(let what): what
        case .insufficientStorage(let needed, let available, let path):
            needed > 0 ? "not enough free space in \(path): \(needed) bytes needed, \(available) available" : "no space left in \(path)"
        case .cancelled(let what): "\(what) was cancelled"
        case .held(let asset, let version): "\(asset) is held at version \(version); unhold it first (earshotctl unhold \(asset))"
        case .inconsistentState(let what): "asset store is inconsistent: \(what)"
        case .internalError(let what): what
        case .invalidLanguageModel(let what): what
        case .languageModelQuotaExceeded(let client, let maximum):
            "app \(client.appID) of uid \(client.uid) already keeps \(maximum) prepared custom language models, the most one app may keep"
        }
    }
}

extension AssetError {
    /// `error`'s description naming `key` (`id@version`) once: most failures already start with
    /// it, and a line that adds it again reads "X@3: X@3: …".
    static func describe(_ error: any Error, naming key: String) -> String {
        let text = "\(error)"
        return text.contains(key) ? text : "\(key): \(text)"
    }

    /// The asset error for a failed state-database call: a full filesystem (``DatabaseError/isStorageFull``)
    /// is ``insufficientStorage(needed:available:path:)``, anything else ``internalError(_:)``.
    init(_ error: DatabaseError, database path: String) {
        self = error.isStorageFull
            ? .insufficientStorage(needed: 0, available: 0, path: "the state database (\(path))")
            : .internalError("state database: \(error)")
    }

    /// Whether `error`, from whichever part raised it, says a filesystem is out of space or quota:
    /// `ENOSPC`/`EDQUOT` from a system call (directly, through libarchive, libcurl's writes or
    /// Foundation's file manager) or SQLite's "database or disk is full".
    static func isOutOfSpace(_ error: any Error) -> Bool {
        switch error {
        case let e as AssetError:
            if case .insufficientStorage = e { return true }
            return false
        case let e as DatabaseError: return e.isStorageFull
        case let e as SystemError: return isOutOfSpace(errno: e.errno)
        case let e as ExtractionError:
            if case .io(let io) = e { return isOutOfSpace(errno: io.errno) }
            return false
        case let e as DownloadError:
            switch e {
            case .insufficientStorage: return true
            case .io(let io): return isOutOfSpace(errno: io.errno)
            default: return false
            }
        case let e as POSIXError: return isOutOfSpace(errno: e.code.rawValue)
        case let e as CocoaError:
            if e.code == .fileWriteOutOfSpace { return true }
            return (e.userInfo[NSUnderlyingErrorKey] as? any Error).map(isOutOfSpace) ?? false
        default:
            let ns = error as NSError
            return ns.domain == NSPOSIXErrorDomain && isOutOfSpace(errno: Int32(ns.code))
        }
    }

    private static func isOutOfSpace(errno code: Int32) -> Bool { code == ENOSPC || code == EDQUOT }
}

/// Who holds reservations: a uid and the app id it said hello with.
public struct ClientIdentity: Sendable, Hashable, CustomStringConvertible {
    public var uid: UInt32
    public var appID: String
    public init(uid: UInt32, appID: String) {
        self.uid = uid
        self.appID = appID
    }
    public var description: String { "\(uid)/\(appID)" }
}
