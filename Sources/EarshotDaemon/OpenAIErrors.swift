import EarshotHTTP
import EarshotWire

/// OpenAI's error body: `{"error": {"message", "type", "param", "code"}}`.
struct OpenAIErrorBody: Codable, Sendable {
    struct Detail: Codable, Sendable {
        var message: String
        var type: String
        var param: String?
        var code: String?
    }
    var error: Detail
}

extension HTTPResponse {
    /// An error in OpenAI's shape; `code` is Earshot's wire code (the same as on the socket) or
    /// one of OpenAI's own (`model_not_found`).
    static func openAIError(_ status: Int, _ message: String, code: String?, param: String? = nil) -> HTTPResponse {
        let kind = status >= 500 ? "server_error" : status == 401 || status == 403 ? "authentication_error" : "invalid_request_error"
        let retry: [(name: String, value: String)] = status == 429 || status == 503 ? [("Retry-After", "1")] : []
        return .json(OpenAIErrorBody(error: .init(message: message, type: kind, param: param, code: code)), status: status, headers: retry)
    }

    /// The HTTP status of each wire code: the same failure has one meaning on every front.
    static func openAIError(_ error: WireError, param: String? = nil) -> HTTPResponse {
        let status = switch error.code {
        case .badRequest, .unsupportedLocale: 400
        case .permissionDenied, .quotaExceeded: 403
        case .notFound, .notInstalled: 404
        case .unsupportedAudioFormat: 415
        case .insufficientResources: 429
        case .shuttingDown: 503
        case .insufficientStorage: 507
        case .downloadFailed, .verificationFailed: 502
        default: 500
        }
        return openAIError(status, error.message, code: error.code.rawValue, param: param)
    }
}
