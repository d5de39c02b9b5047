import EarshotAssets
import EarshotHTTP
import EarshotSystem
import EarshotWire
import Foundation

/// The HTTP front (`Docs/HTTP.md`): OpenAI's audio API and model list over libmicrohttpd, on the
/// same coordinator, sessions and models as the socket protocol, plus Earshot's own
/// `/earshot/v1/` routes (``EarshotHTTPRoutes``). On the Unix socket identity comes
/// from peer credentials and `X-Earshot-App` names the app (default `http`); over TCP a bearer key
/// from the admin's key file names the app and every request acts as one configured user.
struct HTTPFront: HTTPHandler {
    typealias Handler = @Sendable (HTTPFront, HTTPRequest, AnalysisClient) async -> HTTPResponse
    typealias Route = HTTPRouter<Handler>.Route

    /// Every route the front serves, on one screen.
    static let routes: [Route] = [
        // OpenAI's audio API
        Route(method: "GET", path: "/v1/models", access: .client) { front, _, _ in await front.models() },
        Route(method: "GET", path: "/v1/models/*", access: .client) { front, request, _ in await front.model(String(request.head.path.dropFirst("/v1/models/".count))) },
        Route(method: "POST", path: "/v1/audio/transcriptions", access: .client) { front, request, client in
            await front.transcription.respond(to: request, client: client, translate: false)
        },
        Route(method: "POST", path: "/v1/audio/translations", access: .client) { front, request, client in
            await front.transcription.respond(to: request, client: client, translate: true)
        },
        // Earshot's own, served through the socket's route table (its privileges apply)
        Route(method: "GET", path: "/earshot/v1/status", access: .client) { front, request, client in await front.earshot.status(request, client) },
        Route(method: "POST", path: "/earshot/v1/install", access: .client) { front, request, client in await front.earshot.install(request, client) },
        Route(method: "GET", path: EarshotHTTPRoutes.reservationsPath, access: .client) { front, request, client in await front.earshot.reservations(request, client) },
        Route(method: "POST", path: EarshotHTTPRoutes.reservationsPath, access: .client) { front, request, client in await front.earshot.reserve(request, client) },
        Route(method: "DELETE", path: EarshotHTTPRoutes.reservationsPath + "/*", access: .client) { front, request, client in await front.earshot.release(request, client) },
        // Prometheus
        Route(method: "GET", path: "/metrics", access: .scraper) { front, _, _ in
            let text = await front.metrics.scrape(speech: front.coordinator.speech, assets: front.coordinator.assets)
            return HTTPResponse(status: 200, headers: [("Content-Type", MetricsRegistry.contentType)], body: .bytes(Data(text.utf8)))
        },
    ]

    /// ``routes``, checked and indexed once when the front is made.
    let router: HTTPRouter<Handler>
    let coordinator: AnalysisCoordinator
    let transcription: OpenAITranscription
    /// `/earshot/v1/`: socket events served through the daemon's route table.
    let earshot: EarshotHTTPRoutes
    let errors: ErrorMap
    let metrics: DaemonMetrics
    /// Who TCP clients are.
    let network: HTTPNetworkAccess
    /// Session-table keys for HTTP requests, in a range the socket's connection ids never reach.
    let requestIDs = RequestIDs()
    /// Connection slots per uid and per address.
    let admission: HTTPAdmission
    let admins: AdminPolicy
    /// Refusals and cut slow clients, logged once per burst.
    let refusals: RefusalLog

    /// Throws ``HTTPRouter/DuplicateRoute`` when ``routes`` names a method and path twice.
    init(harness: DaemonHarness, admins: AdminPolicy, metrics: DaemonMetrics, network: HTTPNetworkAccess, scratch: String,
         admission: HTTPAdmission, refusals: RefusalLog) throws {
        router = try HTTPRouter(Self.routes)
        coordinator = harness.coordinator
        self.admission = admission
        self.admins = admins
        self.refusals = refusals
        self.network = network
        errors = harness.errors
        self.metrics = metrics
        transcription = OpenAITranscription(coordinator: harness.coordinator, errors: harness.errors, scratch: scratch)
        earshot = EarshotHTTPRoutes(harness: harness, admins: admins, networkUser: network.user)
    }

    // MARK: - Connections

    /// The slot accounting's view of `peer`: a local uid (admins have the reserve and no per-uid
    /// cap), or a TCP address acting as the network user.
    func slotPeer(_ peer: HTTPPeer) -> PeerSlots.Peer {
        switch peer {
        case .local(let credentials): .local(uid: credentials.uid, admin: admins.isAdmin(credentials))
        case .network(let host, _): .network(uid: network.user.uid, host: host)
        }
    }

    static func describe(_ peer: PeerSlots.Peer) -> String {
        switch peer {
        case .local(let uid, _): "uid \(uid) on the HTTP socket"
        case .network(_, let host): "HTTP peer \(host)"
        }
    }

    func admit(_ peer: HTTPPeer) -> HTTPResponse? {
        let slot = slotPeer(peer)
        guard let refusal = admission.admit(slot) else { return nil }
        metrics.admissionRefusals.add(1)
        let response = HTTPResponse.openAIError(refusal.everyone ? 503 : 429, refusal.message, code: ErrorCode.insufficientResources.rawValue)
        metrics.httpRequests.add(1, "connection", String(response.status))
        refusals.refused(Self.describe(slot), refusal.message)
        return response
    }

    func closed(_ peer: HTTPPeer) { admission.release(slotPeer(peer)) }

    func cut(_ peer: HTTPPeer, because reason: HTTPSlowClient) {
        metrics.httpSlowClients.add(1, reason.label)
        refusals.refused(Self.describe(slotPeer(peer)), "connection closed: \(reason)")
    }

    // MARK: - Requests

    func screen(_ head: HTTPRequestHead) -> HTTPResponse? {
        let refused = refusal(head)
        if let refused { counted(refused, head) }
        return refused
    }

    /// The answer to a request refused on its head alone: unknown route, wrong method, no identity.
    private func refusal(_ head: HTTPRequestHead) -> HTTPResponse? {
        let route: Route
        switch router.match(head.method, head.path) {
        case .notFound: return .openAIError(404, "no route \(head.path) (see Docs/HTTP.md)", code: ErrorCode.notFound.rawValue)
        case .wrongMethod(let allowed):
            var response = HTTPResponse.openAIError(405, "\(head.path) takes \(allowed.joined(separator: ", ")), not \(head.method)", code: ErrorCode.badRequest.rawValue)
            response.headers.append(("Allow", allowed.joined(separator: ", ")))
            return response
        case .found(let found): route = found
        }
        if case .network = head.peer, route.access == .scraper, network.metrics == .off {
            return .openAIError(403, "/metrics is not served over TCP ([HTTP] TCPMetrics=off): scrape the Unix socket", code: ErrorCode.permissionDenied.rawValue)
        }
        if case .network = head.peer, network.identity(head, access: route.access) == nil {
            var response = HTTPResponse.openAIError(401, head.header("authorization") == nil ? "a valid API key is required over TCP (Authorization: Bearer KEY; keys are in [HTTP] KeyFile)" : "invalid API key",
                                                    code: "invalid_api_key")
            response.headers.append(("WWW-Authenticate", "Bearer"))
            return response
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
        guard case .found(let route) = router.match(request.head.method, request.head.path) else {
            return refusal(request.head) ?? .openAIError(404, "no route", code: ErrorCode.notFound.rawValue)
        }
        let identity: (uid: UInt32, appID: String)?
        switch request.head.peer {
        case .local(let peer): identity = (peer.uid, request.head.header("x-earshot-app") ?? "http")
        case .network: identity = network.identity(request.head, access: route.access).map { (network.user.uid, $0) }
        }
        guard let identity else { return refusal(request.head) ?? .openAIError(401, "invalid API key", code: "invalid_api_key") }
        let client = AnalysisClient(connection: requestIDs.next(), uid: identity.uid, appID: identity.appID)
        return counted(await route.handle(self, request, client), request.head)
    }

    /// Counts `response` under its route's path pattern (`other` for paths no route serves).
    @discardableResult
    private func counted(_ response: HTTPResponse, _ head: HTTPRequestHead) -> HTTPResponse {
        metrics.httpRequests.add(1, router.pattern(of: head.path), String(response.status))
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

/// The HTTP front's connection slots: the socket front's accounting (``PeerSlots``) under a lock,
/// since the server's accept queue takes slots and connection threads give them back.
final class HTTPAdmission: @unchecked Sendable {
    // Unchecked: `slots` is guarded by `lock`.
    private let lock = NSLock()
    private var slots: PeerSlots

    init(limits: ConnectionLimits) { slots = PeerSlots(limits: limits) }

    func admit(_ peer: PeerSlots.Peer) -> PeerSlots.Refusal? { lock.withLock { slots.admit(peer) } }
    func release(_ peer: PeerSlots.Peer) { lock.withLock { slots.release(peer) } }
}

/// Hands out session-table keys for HTTP requests (each request is its own "connection" to the
/// coordinator), starting far above any socket connection id.
final class RequestIDs: @unchecked Sendable {
    private let lock = NSLock()
    // Guarded by `lock`.
    private var last = 1 << 40
    func next() -> Int { lock.withLock { last += 1; return last } }
}

/// Who TCP clients of the HTTP front are: a bearer key from `[HTTP] KeyFile` (lines `KEY APP-ID`)
/// names the app; every TCP request acts as ``user`` (never an admin). Without a key, only when
/// the admin allowed anonymous access (``anonymousApp``).
struct HTTPNetworkAccess: Sendable {
    var keys: [(key: [UInt8], app: String)] = []
    var user = PeerCredentials(pid: 0, uid: 65534, gid: 65534)
    var anonymousApp: String?
    /// Who may read `/metrics` over TCP (`[HTTP] TCPMetrics`).
    var metrics: MetricsAccess = .key

    /// `[HTTP] TCPMetrics`: `key` — a key from the key file, never anonymous; `open` — anyone who
    /// reaches the port (a scraper without credentials); `off` — never over TCP.
    enum MetricsAccess: String, Sendable, CaseIterable { case key, open, off }

    /// Reads a key file: `KEY APP-ID` per line, `#` comments; keys of at least 16 characters.
    static func keys(fromFile path: String) throws -> [(key: [UInt8], app: String)] {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        return try text.split(separator: "\n").enumerated().compactMap { index, line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if fields.isEmpty || fields[0].hasPrefix("#") { return nil }
            guard fields.count == 2, fields[0].utf8.count >= 16, DaemonHarness.isValidAppID(String(fields[1])) else {
                throw WireError(.badRequest, "\(path):\(index + 1): expected 'KEY APP-ID' with a key of at least 16 characters")
            }
            return (Array(fields[0].utf8), String(fields[1]))
        }
    }

    /// The app a request to a route with `access` acts as: its bearer key's, else the anonymous
    /// one (for a scraper, as `TCPMetrics` says); nil: refused.
    func identity(_ head: HTTPRequestHead, access: HTTPAccess) -> String? {
        guard access == .scraper else { return identity(head) }
        switch metrics {
        case .off: return nil
        case .open: return keyed(head) ?? "http-metrics"
        case .key: return keyed(head)
        }
    }

    /// The app of the request's bearer key, else the anonymous one; nil: refused.
    private func identity(_ head: HTTPRequestHead) -> String? {
        guard let header = head.header("authorization"), header.hasPrefix("Bearer ") else { return anonymousApp }
        return keyed(head)
    }

    /// The app of the request's bearer key; nil without a valid one.
    private func keyed(_ head: HTTPRequestHead) -> String? {
        guard let header = head.header("authorization"), header.hasPrefix("Bearer ") else { return nil }
        let offered = Array(header.dropFirst(7).utf8)
        // Every key is compared in full, so timing does not tell how much of a key matched.
        var found: String?
        for entry in keys where Self.constantTimeEqual(entry.key, offered) { found = entry.app }
        return found
    }

    private static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}
