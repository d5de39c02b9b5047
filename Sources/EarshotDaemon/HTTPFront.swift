import EarshotAssets
import EarshotHTTP
import EarshotSystem
import EarshotWire
import Foundation

/// The HTTP front (`Docs/HTTP.md`): OpenAI's audio API and model list over libmicrohttpd, on the
/// same coordinator, sessions and models as the socket protocol. Identity comes from the Unix
/// socket's peer credentials; `X-Earshot-App` names the app (default `http`), whose reservations
/// and quota are the same as any client's.
struct HTTPFront: HTTPHandler {
    /// One route: method, path (a trailing `*` matches any rest) and its handler.
    struct Route: Sendable {
        let method: String
        let path: String
        let handle: @Sendable (HTTPFront, HTTPRequest, AnalysisClient) async -> HTTPResponse
        func matches(_ path: String) -> Bool {
            self.path.hasSuffix("*") ? path.hasPrefix(self.path.dropLast()) && path.count > self.path.count - 1 : path == self.path
        }
    }

    static let routes: [Route] = [
        Route(method: "GET", path: "/v1/models") { front, _, _ in await front.models() },
        Route(method: "GET", path: "/v1/models/*") { front, request, _ in await front.model(String(request.head.path.dropFirst("/v1/models/".count))) },
        Route(method: "POST", path: "/v1/audio/transcriptions") { front, request, client in
            await front.transcription.respond(to: request, client: client, translate: false)
        },
        Route(method: "POST", path: "/v1/audio/translations") { front, request, client in
            await front.transcription.respond(to: request, client: client, translate: true)
        },
        Route(method: "GET", path: "/metrics") { front, _, _ in
            let text = await front.metrics.scrape(speech: front.coordinator.speech, assets: front.coordinator.assets)
            return HTTPResponse(status: 200, headers: [("Content-Type", MetricsRegistry.contentType)], body: .bytes(Data(text.utf8)))
        },
    ]

    let coordinator: AnalysisCoordinator
    let transcription: OpenAITranscription
    let errors: ErrorMap
    let metrics: DaemonMetrics
    /// Session-table keys for HTTP requests, in a range the socket's connection ids never reach.
    let requestIDs = RequestIDs()

    init(coordinator: AnalysisCoordinator, errors: ErrorMap, metrics: DaemonMetrics, scratch: String) {
        self.coordinator = coordinator
        self.errors = errors
        self.metrics = metrics
        transcription = OpenAITranscription(coordinator: coordinator, errors: errors, scratch: scratch)
    }

    func screen(_ head: HTTPRequestHead) -> HTTPResponse? {
        let refused = refusal(head)
        if let refused { counted(refused, head) }
        return refused
    }

    /// The answer to a request refused on its head alone: unknown route, wrong method, no identity.
    private func refusal(_ head: HTTPRequestHead) -> HTTPResponse? {
        let candidates = Self.routes.filter { $0.matches(head.path) }
        if candidates.isEmpty { return .openAIError(404, "no route \(head.path) (see Docs/HTTP.md)", code: ErrorCode.notFound.rawValue) }
        if !candidates.contains(where: { $0.method == head.method }) {
            var response = HTTPResponse.openAIError(405, "\(head.path) takes \(candidates.map(\.method).joined(separator: ", ")), not \(head.method)", code: ErrorCode.badRequest.rawValue)
            response.headers.append(("Allow", candidates.map(\.method).joined(separator: ", ")))
            return response
        }
        guard case .local = head.peer else {
            return .openAIError(401, "this listener identifies clients by their Unix-socket credentials", code: ErrorCode.permissionDenied.rawValue)
        }
        if let app = head.header("x-earshot-app"), !DaemonHarness.isValidAppID(app) {
            return .openAIError(400, "X-Earshot-App must be 1–255 characters of letters, digits, '.', '_' or '-'", code: ErrorCode.badRequest.rawValue)
        }
        return nil
    }

    func rejection(_ reason: HTTPRejection, head: HTTPRequestHead) -> HTTPResponse {
        counted(rejectionResponse(reason), head)
    }

    private func rejectionResponse(_ reason: HTTPRejection) -> HTTPResponse {
        switch reason {
        case .bodyTooLarge(let limit):
            .openAIError(413, "the request body is larger than \(limit >> 20) MiB ([HTTP] MaxBodyMiB)", code: "request_too_large")
        case .malformedForm:
            .openAIError(400, "the multipart/form-data body could not be parsed", code: ErrorCode.badRequest.rawValue, param: "file")
        case .shuttingDown:
            .openAIError(503, "earshotd is shutting down", code: ErrorCode.shuttingDown.rawValue)
        }
    }

    func respond(to request: HTTPRequest) async -> HTTPResponse {
        guard let route = Self.routes.first(where: { $0.method == request.head.method && $0.matches(request.head.path) }),
              case .local(let peer) = request.head.peer else {
            return refusal(request.head) ?? .openAIError(404, "no route", code: ErrorCode.notFound.rawValue)
        }
        let client = AnalysisClient(connection: requestIDs.next(), uid: peer.uid, appID: request.head.header("x-earshot-app") ?? "http")
        return counted(await route.handle(self, request, client), request.head)
    }

    /// Counts `response` under its route (`other` for paths no route serves).
    @discardableResult
    private func counted(_ response: HTTPResponse, _ head: HTTPRequestHead) -> HTTPResponse {
        let route = Self.routes.first { $0.matches(head.path) }?.path ?? "other"
        metrics.httpRequests.add(1, route, String(response.status))
        return response
    }

    // MARK: - Models

    struct Model: Codable, Sendable {
        var id: String
        var object = "model"
        var created: Int
        var ownedBy: String
        enum CodingKeys: String, CodingKey { case id, object, created, ownedBy = "owned_by" }
    }

    struct ModelList: Codable, Sendable {
        var object = "list"
        var data: [Model]
    }

    /// Installed speech models (current versions), plus `whisper-1` when a transcriber is
    /// installed (it names the preferred one, for clients that only know OpenAI's name).
    private func listed() async throws -> [Model] {
        let installed = try await coordinator.assets.installedAssets().filter { $0.current && $0.entry.kind != .detector }
        var models = installed.map { Model(id: $0.entry.id, created: Int($0.installedAt), ownedBy: "earshot") }
        if let transcriber = installed.filter({ $0.entry.kind == .transcriber }).min(by: { $0.installedAt < $1.installedAt }) {
            models.append(Model(id: "whisper-1", created: Int(transcriber.installedAt), ownedBy: "earshot"))
        }
        return models.sorted { $0.id < $1.id }
    }

    func models() async -> HTTPResponse {
        do { return .json(ModelList(data: try await listed())) } catch { return .openAIError(errors.wire(error)) }
    }

    func model(_ id: String) async -> HTTPResponse {
        do {
            guard let model = try await listed().first(where: { $0.id == id }) else {
                return .openAIError(404, "The model '\(id)' does not exist or is not installed", code: "model_not_found", param: "model")
            }
            return .json(model)
        } catch {
            return .openAIError(errors.wire(error))
        }
    }
}

/// Hands out session-table keys for HTTP requests (each request is its own "connection" to the
/// coordinator), starting far above any socket connection id.
final class RequestIDs: @unchecked Sendable {
    private let lock = NSLock()
    // Guarded by `lock`.
    private var last = 1 << 40
    func next() -> Int { lock.withLock { last += 1; return last } }
}
