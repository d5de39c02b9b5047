import EarshotAssets
import EarshotAudio
import EarshotSpeech
import EarshotSystem
import EarshotWire
import Foundation

/// The one place where every module's typed errors become wire errors (`Docs/PROTOCOL.md` §6).
///
/// What a client did wrong keeps its message. Anything that is the daemon's own failure — an
/// `internalError` from any module, or an error no module types — reaches the client only as
/// `internal error <id>` with no detail: the detail goes to the log at error priority with the same
/// id (journal field `ERROR_ID`), so an admin can find it and a client learns nothing about the
/// daemon's internals.
struct ErrorMap: Sendable {
    /// Where internal errors are logged; nil only where nothing can be internal (tests, the
    /// connection-level refusals).
    let logger: Logger?
    /// Where errors are counted by code (nil: not counted).
    var metrics: DaemonMetrics? = nil

    /// The wire error for `error`; `fields` (connection, peer) go into the log line of an internal one.
    func wire(_ error: any Error, _ fields: [String: String] = [:]) -> WireError {
        let mapped = Self.classify(error)
        metrics?.errors.add(1, mapped.code.rawValue)
        if mapped.code == .insufficientResources { metrics?.admissionRefusals.add() }
        guard mapped.code == .internalError else { return mapped }
        let id = Self.newID()
        logger?.error("internal error \(id): \(mapped.message)", fields.merging(["error_id": id]) { $1 })
        return WireError(.internalError, "internal error \(id); the daemon's log has the details (journalctl ERROR_ID=\(id))")
    }

    /// The code and client-facing message of every typed error; anything untyped is internal.
    static func classify(_ error: any Error) -> WireError {
        switch error {
        case let e as WireError: e
        case let e as EventDecodingError: WireError(.badRequest, e.description)
        case let e as FrameError: WireError(.malformedFrame, e.description)
        case let e as AssetError:
            switch e {
            case .unsupportedLocale, .unsupportedModule: WireError(.unsupportedLocale, e.description)
            case .quotaExceeded, .userQuotaExceeded, .languageModelQuotaExceeded: WireError(.quotaExceeded, e.description)
            case .invalidLanguageModel: WireError(.badRequest, e.description)
            case .notFound: WireError(.notFound, e.description)
            case .notInstalled: WireError(.notInstalled, e.description)
            case .permissionDenied: WireError(.permissionDenied, e.description)
            case .verificationFailed: WireError(.verificationFailed, e.description)
            case .downloadFailed: WireError(.downloadFailed, e.description)
            case .insufficientStorage: WireError(.insufficientStorage, e.description)
            case .cancelled: WireError(.cancelled, e.description)
            case .held: WireError(.badRequest, e.description)
            case .inconsistentState, .internalError: WireError(.internalError, e.description)
            }
        case let e as RegistryError:
            switch e {
            case .invalidReference, .plainHTTPRefused: WireError(.badRequest, e.description)
            case .unauthorized, .authFile: WireError(.permissionDenied, e.description)
            case .transport, .status: WireError(.downloadFailed, e.description)
            case .mismatch, .notACatalog: WireError(.verificationFailed, e.description)
            case .io: WireError(.internalError, e.description)
            }
        case let e as AnalysisError:
            switch e {
            case .noModules, .detectorOnly: WireError(.badRequest, e.description)
            case .noSession: WireError(.notFound, e.description)
            case .shuttingDown: WireError(.shuttingDown, e.description)
            }
        case let e as AudioError:
            switch e {
            case .unsupportedFormat, .unreadable: WireError(.unsupportedAudioFormat, e.description)
            case .resampling: WireError(.internalError, e.description)
            }
        case let e as SpeechError:
            switch e {
            case .admissionLimit, .modelMemory: WireError(.insufficientResources, e.description)
            case .incompleteAsset: WireError(.notInstalled, "\(e); reinstall the asset")
            case .unknownEngine, .unsupportedLocale: WireError(.unsupportedLocale, e.description)
            case .noSession: WireError(.notFound, e.description)
            case .unsupportedAudio: WireError(.unsupportedAudioFormat, e.description)
            case .invalidOptions: WireError(.badRequest, e.description)
            }
        case let e as SherpaOnnxError:
            switch e {
            case .missingFile: WireError(.notInstalled, "\(e); reinstall the asset")
            case .inputTooLong, .invalidInput: WireError(.badRequest, e.description)
            case .loadFailed, .engineUnavailable: WireError(.internalError, e.description)
            }
        case let e as PocketSphinxError:
            switch e {
            case .missingModelFile: WireError(.notInstalled, "\(e); reinstall the asset")
            case .invalidWord, .invalidPronunciation, .invalidOption: WireError(.badRequest, e.description)
            default: WireError(.internalError, e.description)
            }
        default: WireError(.internalError, "\(type(of: error)): \(error)")
        }
    }

    /// 8 hex digits: enough to find one line in a journal.
    static func newID() -> String {
        String(UInt32.random(in: 0...UInt32.max), radix: 16).leftPadded(to: 8)
    }
}

extension WireError {
    /// What a connection, request or session refused during shutdown is told.
    static let daemonShuttingDown = ErrorMap.classify(AnalysisError.shuttingDown)
}

private extension String {
    func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
