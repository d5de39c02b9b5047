import EarshotSystem
import Foundation

/// Who sent a request: a local process (kernel-verified credentials from the Unix socket) or a
/// network address (TCP: no kernel identity, so callers authenticate by key).
public enum HTTPPeer: Sendable, Hashable {
    case local(PeerCredentials)
    /// A numeric host and port.
    case network(host: String, port: UInt16)

    /// A network peer from ``TCPSocket/peer(_:)`` (`unknown` when the socket could not say).
    static func network(_ address: (host: String, port: UInt16)?) -> HTTPPeer {
        .network(host: address?.host ?? "unknown", port: address?.port ?? 0)
    }
}

/// A request's line and headers: what the server knows before the body arrives.
public struct HTTPRequestHead: Sendable {
    /// `GET`, `POST`, …
    public var method: String
    /// The path without the query string, percent-decoded by libmicrohttpd.
    public var path: String
    /// Query arguments (the last value of a repeated name).
    public var query: [String: String]
    /// Header names lowercased.
    public var headers: [String: String]
    public var peer: HTTPPeer

    public init(method: String, path: String, query: [String: String] = [:], headers: [String: String] = [:], peer: HTTPPeer) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { _, last in last })
        self.peer = peer
    }

    /// A header's value (case-insensitive name).
    public func header(_ name: String) -> String? { headers[name.lowercased()] }

    /// The media type of the body, without parameters, lowercased.
    public var mediaType: String? {
        header("content-type")?.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
    }
}

/// A file part of a `multipart/form-data` body.
public struct HTTPFormFile: Sendable, Hashable {
    public var filename: String?
    public var contentType: String?
    public var data: Data
    public init(filename: String?, contentType: String?, data: Data) {
        self.filename = filename
        self.contentType = contentType
        self.data = data
    }
}

/// A form body (`multipart/form-data` or `application/x-www-form-urlencoded`) as parsed by
/// libmicrohttpd's post processor. Repeated names (`timestamp_granularities[]`) keep every value.
public struct HTTPForm: Sendable, Hashable {
    public var fields: [String: [String]]
    public var files: [String: HTTPFormFile]
    public init(fields: [String: [String]] = [:], files: [String: HTTPFormFile] = [:]) {
        self.fields = fields
        self.files = files
    }
    /// The last value given for `name`.
    public func value(_ name: String) -> String? { fields[name]?.last }
    /// Every value given for `name`.
    public func values(_ name: String) -> [String] { fields[name] ?? [] }
}

/// A complete request.
public struct HTTPRequest: Sendable {
    public var head: HTTPRequestHead
    /// The raw body when it is not a form.
    public var body: Data
    /// The parsed form when the body is one.
    public var form: HTTPForm?
    public init(head: HTTPRequestHead, body: Data = Data(), form: HTTPForm? = nil) {
        self.head = head
        self.body = body
        self.form = form
    }
}

/// A response: a status, headers, and a body given at once or streamed (server-sent events).
public struct HTTPResponse: Sendable {
    public enum Body: Sendable {
        case bytes(Data)
        /// Chunks sent as they come; the response ends when the stream does. Cancelled (the
        /// stream's termination handler runs) when the client goes away.
        case stream(AsyncStream<Data>)
    }

    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: Body

    public init(status: Int, headers: [(name: String, value: String)] = [], body: Body = .bytes(Data())) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// `text/plain; charset=utf-8`.
    public static func text(_ text: String, status: Int = 200, headers: [(name: String, value: String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "text/plain; charset=utf-8")] + headers, body: .bytes(Data(text.utf8)))
    }

    /// `application/json` with sorted keys (stable output for scripts and tests).
    public static func json(_ value: some Encodable, status: Int = 200, headers: [(name: String, value: String)] = []) -> HTTPResponse {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = (try? encoder.encode(value)) ?? Data("{}".utf8)
        return HTTPResponse(status: status, headers: [("Content-Type", "application/json")] + headers, body: .bytes(data))
    }

    /// `text/event-stream`: each chunk of `events` must be whole SSE events.
    public static func eventStream(_ events: AsyncStream<Data>) -> HTTPResponse {
        HTTPResponse(status: 200, headers: [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")], body: .stream(events))
    }
}

/// Why the server answered a request without asking the handler.
public enum HTTPRejection: Sendable, Hashable {
    /// The body is (or declared itself) larger than the limit.
    case bodyTooLarge(limit: Int)
    /// A form body libmicrohttpd could not parse.
    case malformedForm
    /// The server is stopping.
    case shuttingDown
}

/// What the server calls. `screen` and `rejection` run on the connection's own thread and must
/// not block; `respond` is async.
public protocol HTTPHandler: Sendable {
    /// Called once the head has arrived, before any body is read: a response here (401, 403, 404,
    /// 429…) is sent at once and the body is never buffered.
    func screen(_ head: HTTPRequestHead) -> HTTPResponse?
    /// The response to a request the server refused by itself.
    func rejection(_ reason: HTTPRejection, head: HTTPRequestHead) -> HTTPResponse
    /// The response to a complete request. Cancelled when the client disconnects or the server stops.
    func respond(to request: HTTPRequest) async -> HTTPResponse
    /// A new connection from `peer`, before anything is read: nil admits it; a response refuses it
    /// (sent at once, then the connection is closed). Every admitted connection is later
    /// ``closed(_:)``. Called on the server's accept queue: do not block.
    func admit(_ peer: HTTPPeer) -> HTTPResponse?
    /// A connection ``admit(_:)`` let in has closed.
    func closed(_ peer: HTTPPeer)
    /// The server cut a connection of `peer` that broke ``HTTPPace``.
    func cut(_ peer: HTTPPeer, because reason: HTTPSlowClient)
}

extension HTTPHandler {
    public func admit(_ peer: HTTPPeer) -> HTTPResponse? { nil }
    public func closed(_ peer: HTTPPeer) {}
    public func cut(_ peer: HTTPPeer, because reason: HTTPSlowClient) {}
    public func screen(_ head: HTTPRequestHead) -> HTTPResponse? { nil }
    public func rejection(_ reason: HTTPRejection, head: HTTPRequestHead) -> HTTPResponse {
        switch reason {
        case .bodyTooLarge(let limit): .text("request body larger than \(limit) bytes\n", status: 413)
        case .malformedForm: .text("malformed form body\n", status: 400)
        case .shuttingDown: .text("server is shutting down\n", status: 503)
        }
    }
}
