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
    /// Sessions and Wyoming state of the connection.
    let state: ConnectionState
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

/// Decodes each request, calls the service that owns it and encodes the reply. Failures of any
/// kind become one `error` event here, mapped by type, echoing the request's `id`.
struct DaemonHarness: Sendable {
    let facts: DaemonFacts
    let registry: ConnectionRegistry
    let assets: AssetHarness
    let speech: SpeechHarness
    /// Turns every failure into the client's error event (internal ones logged with an id).
    let errors: ErrorMap

    static let capabilities = ["wyoming-describe", "wyoming-ping", "wyoming-asr", "assets", "analysis"]

    /// Whether `type` may run concurrently with the connection's later requests.
    static func isLongRunning(_ type: String) -> Bool { AssetHarness.longRunning.contains(type) }

    /// Answers one request (replies in order, possibly none); `progress` carries intermediate
    /// events (install progress).
    func handle(_ frame: Frame, context: inout RequestContext, progress: @escaping @Sendable (Frame) -> Void) async -> [Frame] {
        do {
            switch frame.type {
            case Describe.eventType: return [try Frame(await info())]
            case Ping.eventType: return [try Frame(Pong(text: frame.decode(Ping.self).text))]
            case Hello.eventType: return [try await Frame(hello(frame.decode(Hello.self), context: &context))]
            case StatusRequest.eventType: return [try await Frame(status(frame.decode(StatusRequest.self)))]
            case ConfigRequest.eventType: return [try Frame(configReport(frame.decode(ConfigRequest.self)))]
            default:
                if let reply = try await assets.handle(frame, context: context, progress: progress) { return [reply] }
                if let replies = try await speech.handle(frame, context: context) { return replies }
                throw WireError(.unknownEvent, "unknown event type '\(frame.type)'")
            }
        } catch {
            let fields = ["connection": "\(context.connectionID)", "peer_uid": "\(context.peer.uid)", "request": frame.type]
            return [Self.errorFrame(errors.wire(error, fields), id: frame.requestID)]
        }
    }

    /// The `error` frame for a failure (mapped by ``ErrorMap``; without its logger here, so callers
    /// with something that may be internal map it with their harness's ``errors`` first).
    static func errorFrame(_ error: any Error, id: String?) -> Frame {
        let wire = ErrorMap(logger: nil).wire(error)
        // An ErrorEvent always encodes; fall back to a bare frame only if the encoder itself broke.
        return (try? Frame(ErrorEvent(wire, id: id))) ?? Frame(type: ErrorEvent.eventType)
    }

    /// What Wyoming clients see: the installed speech models and their languages.
    func info() async -> Info {
        let installed = (try? await assets.assets.installedAssets().filter { $0.current && $0.entry.kind != .detector }) ?? []
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

    func hello(_ hello: Hello, context: inout RequestContext) async throws -> Welcome {
        guard hello.protocolVersion >= 1 else {
            throw WireError(.unsupportedProtocolVersion, "protocol version \(hello.protocolVersion) is not supported (this daemon speaks \(WireProtocol.earshotVersion))")
        }
        guard Self.isValidAppID(hello.appId) else {
            throw WireError(.badRequest, "app_id must be 1-255 characters of letters, digits, '.', '-' and '_'")
        }
        context.appID = hello.appId
        await registry.setAppID(hello.appId, for: context.connectionID)
        return Welcome(id: hello.id, protocolVersion: min(hello.protocolVersion, WireProtocol.earshotVersion),
                       daemonVersion: EarshotVersion.string, limits: facts.limits, capabilities: Self.capabilities,
                       uid: context.peer.uid, admin: context.admin,
                       maxReservedLocales: await assets.assets.maximumReservedLocales(appID: hello.appId))
    }

    static func isValidAppID(_ id: String) -> Bool {
        (1...255).contains(id.utf8.count) && id.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || "._-".unicodeScalars.contains($0)
        }
    }

    func status(_ request: StatusRequest) async -> DaemonStatus {
        let uptime = ContinuousClock.now - facts.started
        return DaemonStatus(
            id: request.id, daemonVersion: EarshotVersion.string, protocolVersion: WireProtocol.earshotVersion,
            pid: getpid(), uptimeSeconds: Double(uptime.components.seconds) + Double(uptime.components.attoseconds) / 1e18,
            connections: await registry.count, connectionsTotal: await registry.total, mode: facts.paths.mode.rawValue,
            socketActivated: facts.socketActivated, socketPath: facts.socketPath, limits: facts.limits)
    }

    func configReport(_ request: ConfigRequest) -> ConfigReport {
        ConfigReport(id: request.id, entries: facts.config.entries, warnings: facts.config.warnings)
    }
}
