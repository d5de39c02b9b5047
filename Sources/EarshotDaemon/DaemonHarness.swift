import EarshotAssets
import EarshotSystem
import EarshotWire
import Foundation

/// Who is asking: the connection's peer, whether it is an admin, and what `earshot.hello` said.
struct RequestContext: Sendable {
    let connectionID: Int
    let peer: PeerCredentials
    let admin: Bool
    var appID: String?
    /// Over TCP: only the routes open to the network (Wyoming's) are served.
    var network = false
    /// The connection's channel, requests in flight and Wyoming state; nil for an HTTP request
    /// (`/earshot/v1/`), which reaches only routes that need no connection.
    let state: ConnectionState?

    /// Who owns the sessions this connection opens.
    var client: AnalysisClient { AnalysisClient(connection: connectionID, uid: peer.uid, appID: appID) }

    /// The connection's state, for routes that keep something on the connection (sessions'
    /// events, Wyoming's transcription).
    var connection: ConnectionState {
        get throws {
            guard let state else { throw WireError(.badRequest, "this request needs a socket connection (it sends events or keeps state on it)") }
            return state
        }
    }
}

/// Facts about the running daemon that requests report.
struct DaemonFacts: Sendable {
    let config: DaemonConfig
    let paths: DaemonPaths
    let socketPath: String?
    let socketActivated: Bool
    let started: ContinuousClock.Instant
    let limits: DaemonLimits
}

/// Decodes each request, calls the service that owns it and encodes the reply, by the route
/// table: every event type has one route with its privilege. Failures of any kind become one
/// `error` event here, mapped by type, echoing the request's `id`.
struct DaemonHarness: Sendable {
    /// Turns every failure into the client's error event (internal ones logged with an id).
    let errors: ErrorMap
    /// Where the connection's analysis sessions live.
    let coordinator: AnalysisCoordinator
    private let routes: RouteTable

    static let capabilities = ["wyoming-describe", "wyoming-ping", "wyoming-asr", "assets", "analysis"]

    init(facts: DaemonFacts, registry: ConnectionRegistry, assets: AssetHarness, speech: SpeechHarness, errors: ErrorMap) {
        self.errors = errors
        coordinator = speech.coordinator
        routes = RouteTable(Self.daemonRoutes(facts: facts, registry: registry, assets: assets.assets) + assets.routes + speech.routes)
    }

    /// The daemon's own requests: Wyoming `describe` and `ping`, hello, status, config.
    private static func daemonRoutes(facts: DaemonFacts, registry: ConnectionRegistry, assets: AssetService) -> [Route] {
        [
            .on(Describe.self, network: true) { _, _, _ in [try Frame(await info(assets))] },
            .on(Ping.self, network: true) { ping, _, _ in [try Frame(Pong(text: ping.text))] },
            .on(Hello.self) { hello, _, context in [try Frame(await welcome(hello, context: &context, facts: facts, registry: registry, assets: assets))] },
            .on(StatusRequest.self) { request, _, context in
                var status = await status(request, facts: facts, registry: registry)
                if context.admin {
                    status.assets = try await assets.versionSummary()
                    status.lastUpdate = try await assets.lastUpdate()
                }
                return [try Frame(status)]
            },
            .on(ConfigRequest.self) { request, _, _ in [try Frame(ConfigReport(id: request.id, entries: facts.config.entries, warnings: facts.config.warnings))] },
        ]
    }

    /// Whether `type` may run concurrently with the connection's later requests.
    func isLongRunning(_ type: String) -> Bool { routes[type]?.longRunning ?? false }

    /// Answers one request (replies in order, possibly none); `progress` carries intermediate
    /// events (install progress).
    func handle(_ frame: Frame, context: inout RequestContext, progress: @escaping @Sendable (Frame) -> Void) async -> [Frame] {
        do {
            guard let route = routes[frame.type] else { throw WireError(.unknownEvent, "unknown event type '\(frame.type)'") }
            if context.network, !route.network {
                throw WireError(.permissionDenied, "'\(frame.type)' is not served over TCP: the Wyoming listener takes Wyoming events only (describe, transcribe, audio-start, audio-chunk, audio-stop, ping)")
            }
            return try await route.serve(Call(frame: frame, progress: progress), &context)
        } catch {
            let fields = ["connection": "\(context.connectionID)", "peer_uid": "\(context.peer.uid)", "request": frame.type]
            let refusal = errors.wire(error, fields)
            // What an app would otherwise only see itself: a custom language model refused, or a
            // session that could not open (its model missing, for another language, …).
            if Self.loggedRefusals.contains(frame.type), refusal.code != .internalError {
                errors.logger?.info("refused \(frame.type): \(refusal.message) (\(refusal.code))", fields)
            }
            return [Self.errorFrame(refusal, id: frame.requestID)]
        }
    }

    /// Requests whose refusals the journal gets at info priority (internal errors always go at error).
    static let loggedRefusals: Set<String> = [PrepareLanguageModelRequest.eventType, AnalyzerOpen.eventType]

    /// Whether connection `id` has work in flight (a request, a session, a Wyoming transcription):
    /// such a connection is never closed as idle.
    func isBusy(_ id: Int, state: ConnectionState) -> Bool {
        state.isBusy || hasSessions(id)
    }

    /// Whether connection `id` has analysis sessions open.
    func hasSessions(_ id: Int) -> Bool { coordinator.sessions.hasSessions(id) }

    /// The connection closed: the coordinator releases its sessions and what they held, once.
    func connectionClosed(_ context: RequestContext) async {
        await coordinator.connectionClosed(context.connectionID)
    }

    /// The `error` frame for a failure (mapped by ``ErrorMap``; without its logger here, so callers
    /// with something that may be internal map it with their harness's ``errors`` first).
    static func errorFrame(_ error: any Error, id: String?) -> Frame {
        let wire = ErrorMap(logger: nil).wire(error)
        // An ErrorEvent always encodes; fall back to a bare frame only if the encoder itself broke.
        return (try? Frame(ErrorEvent(wire, id: id))) ?? Frame(type: ErrorEvent.eventType)
    }

    /// What Wyoming clients see: the installed speech models and their languages.
    static func info(_ assets: AssetService) async -> Info {
        let installed = (try? await assets.installedAssets().filter { $0.current && $0.entry.kind != .detector }) ?? []
        let models = installed.map { asset in
            AsrModel(name: asset.entry.id, attribution: Attribution(name: asset.entry.license, url: ""), installed: true,
                     description: asset.entry.description, version: "\(asset.entry.version)",
                     languages: asset.entry.locales.compactMap { LocaleTag($0) }.filter { $0.language != LocaleTag.undetermined }.map(\.description))
        }
        return Info(asr: [AsrProgram(
            name: "earshot", attribution: Attribution(name: "Earshot", url: ""),
            installed: true, description: "Earshot on-device speech-to-text service", version: EarshotVersion.string,
            models: models, supportsTranscriptStreaming: true)])
    }

    static func welcome(_ hello: Hello, context: inout RequestContext, facts: DaemonFacts, registry: ConnectionRegistry, assets: AssetService) async throws -> Welcome {
        guard hello.protocolVersion >= 1 else {
            throw WireError(.unsupportedProtocolVersion, "protocol version \(hello.protocolVersion) is not supported (this daemon speaks \(WireProtocol.earshotVersion))")
        }
        guard Self.isValidAppID(hello.appId) else {
            throw WireError(.badRequest, "app_id must be 1-255 characters of letters, digits, '.', '-' and '_'")
        }
        context.appID = hello.appId
        await registry.setAppID(hello.appId, for: context.connectionID)
        return Welcome(id: hello.id, protocolVersion: min(hello.protocolVersion, WireProtocol.earshotVersion),
                       daemonVersion: EarshotVersion.string, limits: facts.limits, capabilities: capabilities,
                       uid: context.peer.uid, admin: context.admin,
                       maxReservedLocales: await assets.maximumReservedLocales(appID: hello.appId))
    }

    static func isValidAppID(_ id: String) -> Bool {
        (1...255).contains(id.utf8.count) && id.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || "._-".unicodeScalars.contains($0)
        }
    }

    static func status(_ request: StatusRequest, facts: DaemonFacts, registry: ConnectionRegistry) async -> DaemonStatus {
        let uptime = ContinuousClock.now - facts.started
        return DaemonStatus(
            id: request.id, daemonVersion: EarshotVersion.string, protocolVersion: WireProtocol.earshotVersion,
            pid: getpid(), uptimeSeconds: Double(uptime.components.seconds) + Double(uptime.components.attoseconds) / 1e18,
            connections: await registry.count, connectionsTotal: await registry.total, mode: facts.paths.mode.rawValue,
            socketActivated: facts.socketActivated, socketPath: facts.socketPath, limits: facts.limits)
    }
}
