import EarshotAssets
import EarshotAudio
@testable import EarshotDaemon
import EarshotSpeech
import EarshotWire
import Foundation
import Testing

/// The daemon's one error map: typed errors keep their code and message; the daemon's own
/// failures reach a client only as an id.
@Suite struct ErrorMapTests {
    struct Untyped: Error, CustomStringConvertible {
        var description: String { "secret path /var/lib/earshot/state.db: disk I/O error" }
    }

    /// Issue 8, part 1: clients received raw `"\(error)"` text of internal failures.
    @Test func internalErrorsReachTheClientAsAnIDOnly() {
        let map = ErrorMap(logger: nil)
        for error in [Untyped() as any Error, WireError(.internalError, "analysis failed: secret path"), AssetError.internalError("secret path"),
                      SherpaOnnxError.loadFailed("the Whisper model in secret path")] {
            let wire = map.wire(error)
            #expect(wire.code == .internalError)
            #expect(!wire.message.contains("secret"), "\(wire.message)")
            #expect(wire.message.range(of: #"^internal error [0-9a-f]{8};"#, options: .regularExpression) != nil, "\(wire.message)")
        }
        #expect(map.wire(Untyped()).message != map.wire(Untyped()).message, "each occurrence has its own id")
    }

    @Test func typedErrorsKeepTheirCodeAndMessage() {
        let map = ErrorMap(logger: nil)
        let cases: [(any Error, ErrorCode)] = [
            (WireError(.quotaExceeded, "full"), .quotaExceeded),
            (AssetError.unsupportedLocale("xx"), .unsupportedLocale),
            (AudioError.unsupportedFormat("24-bit"), .unsupportedAudioFormat),
            (SherpaOnnxError.inputTooLong(seconds: 31, limit: 29.5), .badRequest),
            (SherpaOnnxError.missingFile("/a/b.onnx"), .notInstalled),
            (PocketSphinxError.invalidWord("(x)", reason: "parentheses"), .badRequest),
            (AnalysisError.noModules, .badRequest), (AnalysisError.detectorOnly, .badRequest),
            (AnalysisError.noSession("s9"), .notFound), (AnalysisError.shuttingDown, .shuttingDown),
            // Issue 8: the speech service threw wire errors itself; it has its own typed error now.
            (SpeechError.admissionLimit(open: 4, limit: 4), .insufficientResources), (SpeechError.incompleteAsset("no tokens"), .notInstalled),
            (SpeechError.unknownEngine(asset: "a@1", engine: "x"), .unsupportedLocale), (SpeechError.unsupportedLocale("xx"), .unsupportedLocale),
            (SpeechError.noSession("s1"), .notFound), (SpeechError.unsupportedAudio("8 kHz"), .unsupportedAudioFormat),
            (SpeechError.invalidOptions("a keep-alive needs lingering"), .badRequest),
        ]
        for (error, code) in cases {
            let wire = map.wire(error)
            #expect(wire.code == code, "\(error)")
            #expect(!wire.message.hasPrefix("internal error"))
        }
    }

    /// The asset module's errors carry no wire knowledge: their codes are this map's.
    @Test func everyAssetErrorHasItsCode() {
        let cases: [(AssetError, ErrorCode)] = [
            (.unsupportedLocale("xx"), .unsupportedLocale), (.unsupportedModule("dictation for xx"), .unsupportedLocale),
            (.quotaExceeded(maximum: 2, wanted: ["de"]), .quotaExceeded), (.userQuotaExceeded("uid 1000 holds 8"), .quotaExceeded),
            (.notFound("asset x"), .notFound), (.notInstalled("asset x"), .notInstalled), (.permissionDenied("not yours"), .permissionDenied),
            (.verificationFailed("bad hash"), .verificationFailed), (.downloadFailed("every mirror"), .downloadFailed),
            (.insufficientStorage(needed: 10, available: 1, path: "/cache"), .insufficientStorage), (.cancelled("install"), .cancelled),
            (.inconsistentState("row without tree"), .internalError), (.internalError("bug"), .internalError),
        ]
        for (error, code) in cases {
            let wire = ErrorMap.classify(error)
            #expect(wire.code == code, "\(error)")
            #expect(wire.message == error.description)
        }
    }
}
