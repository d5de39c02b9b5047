import EarshotWire

/// Who may make a request: everyone, or only admins — always, or when the decoded request asks
/// for something beyond the caller's own (another client's reservation, a catalog refresh).
struct Privilege<Request>: Sendable {
    /// What an admin-only request does (named in the refusal), or nil when anyone may make it.
    let adminOnly: @Sendable (Request, RequestContext) -> String?

    static var everyone: Self { Self { _, _ in nil } }

    /// Admins only; `what` completes "only admins may …".
    static func admin(_ what: String) -> Self { Self { _, _ in what } }

    /// Admins only when `condition` holds for the request.
    static func admin(_ what: String, when condition: @escaping @Sendable (Request, RequestContext) -> Bool) -> Self {
        Self { request, context in condition(request, context) ? what : nil }
    }
}

/// A request being served: its frame (for the payload) and where intermediate events go.
struct Call: Sendable {
    let frame: Frame
    /// Events sent before the reply (install progress).
    let progress: @Sendable (Frame) -> Void
}

/// One event type's handler and the privilege it needs, declared once.
struct Route: Sendable {
    let type: String
    /// Served beside the connection's later requests (downloads may take minutes).
    let longRunning: Bool
    let serve: @Sendable (Call, inout RequestContext) async throws -> [Frame]

    /// The route for `Request`: decode, check `privilege`, then `handler` (replies in order, possibly none).
    static func on<Request: WireEvent>(_: Request.Type, _ privilege: Privilege<Request> = .everyone, longRunning: Bool = false,
                                       _ handler: @escaping @Sendable (Request, Call, inout RequestContext) async throws -> [Frame]) -> Route {
        Route(type: Request.eventType, longRunning: longRunning) { call, context in
            let request = try call.frame.decode(Request.self)
            if let what = privilege.adminOnly(request, context), !context.admin {
                throw WireError(.permissionDenied, "only admins may \(what) (root, the daemon's own user or members of the admin group)")
            }
            return try await handler(request, call, &context)
        }
    }
}

/// Every route by event type.
struct RouteTable: Sendable {
    private let routes: [String: Route]

    /// `routes` must name each event type once.
    init(_ routes: [Route]) {
        self.routes = Dictionary(routes.map { ($0.type, $0) }) { first, _ in preconditionFailure("two routes for \(first.type)") }
    }

    /// The route for `type`; nil for a type the daemon does not handle.
    subscript(type: String) -> Route? { routes[type] }
}
