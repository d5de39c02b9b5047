import EarshotHTTP
import EarshotSystem
import EarshotWire
import Foundation

/// Earshot's own routes on the HTTP front, under `/earshot/v1/` (Docs/HTTP.md): asset status,
/// install with progress as server-sent events, reservations. Each serves one socket protocol
/// event through ``DaemonHarness`` — its route, privilege and identity rules (`Routes.swift`) —
/// with the event's data as JSON in and out; errors are ``ErrorMap``'s, with the one HTTP status
/// mapping of `OpenAIErrors.swift`.
struct EarshotHTTPRoutes: Sendable {
    let harness: DaemonHarness
    let admins: AdminPolicy
    /// Who TCP callers act as.
    let networkUser: PeerCredentials

    /// `GET /earshot/v1/status?modules=KIND[:LOCALE],…` → `earshot.module-status`.
    func status(_ request: HTTPRequest, _ client: AnalysisClient) async -> HTTPResponse {
        do {
            let modules = try Self.modules(request.head.query["modules"])
            return await serve(try Frame(ModuleStatusRequest(modules: modules)), request, client)
        } catch {
            return .openAIError(harness.errors.wire(error), param: "modules")
        }
    }

    /// `GET /earshot/v1/reservations[?all=true]` → `earshot.reservations` (`all`: admins only).
    func reservations(_ request: HTTPRequest, _ client: AnalysisClient) async -> HTTPResponse {
        do {
            let all = try Self.flag(request.head.query["all"], name: "all")
            return await serve(try Frame(ReservationsRequest(all: all)), request, client)
        } catch {
            return .openAIError(harness.errors.wire(error), param: "all")
        }
    }

    /// `POST /earshot/v1/reservations` with `{"locale": L}` → `earshot.reserve`.
    func reserve(_ request: HTTPRequest, _ client: AnalysisClient) async -> HTTPResponse {
        do {
            return await serve(try Self.frame(ReserveRequest.eventType, body: request), request, client)
        } catch {
            return .openAIError(harness.errors.wire(error))
        }
    }

    /// `DELETE /earshot/v1/reservations/{locale}[?uid=N&app_id=APP]` → `earshot.release`
    /// (another client's: admins only).
    func release(_ request: HTTPRequest, _ client: AnalysisClient) async -> HTTPResponse {
        do {
            let locale = String(request.head.path.dropFirst(Self.reservationsPath.count + 1))
            var uid: UInt32?
            if let text = request.head.query["uid"] {
                guard let value = UInt32(text) else { throw WireError(.badRequest, "uid must be a user id, not '\(text)'") }
                uid = value
            }
            return await serve(try Frame(ReleaseRequest(locale: locale, uid: uid, appId: request.head.query["app_id"])), request, client)
        } catch {
            return .openAIError(harness.errors.wire(error))
        }
    }

    /// `POST /earshot/v1/install` with `{"modules": [...]}` → `earshot.install`. A request refused
    /// before any progress gets its error status; otherwise `200 text/event-stream`: one SSE event
    /// per socket event (`earshot.install.progress`…, then `earshot.install.result`, or `error`
    /// with the error body). A client that hangs up gets no more events; the request waits for
    /// its install as a socket request whose connection closed does (nothing is cancelled, so no
    /// failure is made up).
    func install(_ request: HTTPRequest, _ client: AnalysisClient) async -> HTTPResponse {
        let frame: Frame
        do {
            frame = try Self.frame(InstallRequest.eventType, body: request)
        } catch {
            return .openAIError(harness.errors.wire(error))
        }
        let caller = await context(request, client)
        let harness = harness
        let (events, sink) = AsyncStream<Frame>.makeStream()
        Task {
            var context = caller
            for reply in await harness.handle(frame, context: &context, progress: { sink.yield($0) }) { sink.yield(reply) }
            sink.finish()
        }
        let (body, out) = AsyncStream<Data>.makeStream()
        // The first event decides the status: an error before any progress is the response's.
        let first: Frame? = await withCheckedContinuation { decided in
            Task {
                var undecided: CheckedContinuation<Frame?, Never>? = decided
                for await event in events {
                    if let waiting = undecided {
                        undecided = nil
                        waiting.resume(returning: event)
                        if event.type == ErrorEvent.eventType { break }
                    }
                    out.yield(Self.serverSentEvent(event))
                }
                undecided?.resume(returning: nil)
                out.finish()
            }
        }
        guard let first else { return .openAIError(harness.errors.wire(WireError(.internalError, "earshot.install sent no reply"))) }
        if first.type == ErrorEvent.eventType { return Self.response(first) }
        return .eventStream(body)
    }

    // MARK: - Internals

    static let reservationsPath = "/earshot/v1/reservations"

    /// Serves `frame` through its socket route; the reply's data, or its error.
    private func serve(_ frame: Frame, _ request: HTTPRequest, _ client: AnalysisClient) async -> HTTPResponse {
        var context = await context(request, client)
        guard let reply = await harness.handle(frame, context: &context, progress: { _ in }).last else {
            return .openAIError(harness.errors.wire(WireError(.internalError, "\(frame.type) sent no reply")))
        }
        return Self.response(reply)
    }

    /// Who is asking, as a socket request would know it: the peer credentials (TCP: the
    /// configured user, never an admin) and the app from `X-Earshot-App` or the API key.
    private func context(_ request: HTTPRequest, _ client: AnalysisClient) async -> RequestContext {
        switch request.head.peer {
        case .local(let peer):
            let admins = admins
            let admin = await BlockingWork.run("earshot.admin-check") { admins.isAdmin(peer) }
            return RequestContext(connectionID: client.connection, peer: peer, admin: admin, appID: client.appID, state: nil)
        case .network:
            return RequestContext(connectionID: client.connection, peer: networkUser, admin: false, appID: client.appID, state: nil)
        }
    }

    /// A reply frame as a response: its data without the request id, or its error's status.
    static func response(_ reply: Frame) -> HTTPResponse {
        if reply.type == ErrorEvent.eventType, let event = try? reply.decode(ErrorEvent.self) { return .openAIError(event.wireError) }
        var data = reply.data
        data["id"] = nil
        return .json(data)
    }

    /// One SSE event: `event:` the frame's type, `data:` its JSON (an error's in OpenAI's shape).
    static func serverSentEvent(_ frame: Frame) -> Data {
        let json: Data
        if frame.type == ErrorEvent.eventType, let event = try? frame.decode(ErrorEvent.self), case .bytes(let body) = HTTPResponse.openAIError(event.wireError).body {
            json = body
        } else {
            var data = frame.data
            data["id"] = nil
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            json = (try? encoder.encode(data)) ?? Data("{}".utf8)
        }
        return Data("event: \(frame.type)\ndata: ".utf8) + json + Data("\n\n".utf8)
    }

    /// The socket event `type` with a JSON body as its data (an `id` in it is ignored).
    static func frame(_ type: String, body request: HTTPRequest) throws -> Frame {
        guard request.form == nil, request.head.mediaType == "application/json",
              var data = try? JSONDecoder().decode([String: JSONValue].self, from: request.body) else {
            throw WireError(.badRequest, "the body must be a JSON object (Content-Type: application/json): the data of \(type) (Docs/PROTOCOL.md)")
        }
        data["id"] = nil
        return Frame(type: type, data: data)
    }

    /// `KIND[:LOCALE],…` (kinds `transcriber`, `dictation`, `detector`).
    static func modules(_ text: String?) throws -> [ModuleConfiguration] {
        guard let text, !text.isEmpty else { throw WireError(.badRequest, "modules is required: KIND[:LOCALE],… (transcriber, dictation, detector)") }
        return try text.split(separator: ",", omittingEmptySubsequences: false).map { item in
            let parts = item.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            guard let kind = AssetKind(rawValue: String(parts[0])), parts.count == 1 || !parts[1].isEmpty else {
                throw WireError(.badRequest, "modules: '\(item)' is not KIND[:LOCALE] with KIND transcriber, dictation or detector")
            }
            return ModuleConfiguration(kind: kind, locale: parts.count == 2 ? String(parts[1]) : nil)
        }
    }

    /// A boolean query argument: absent or `false` is false, `true` is true.
    static func flag(_ text: String?, name: String) throws -> Bool {
        switch text {
        case nil, "false": false
        case "true": true
        case let other?: throw WireError(.badRequest, "\(name) must be true or false, not '\(other)'")
        }
    }
}
