/// Who may call an HTTP route over TCP. (On the Unix socket every peer is known by its
/// credentials; admin-only `/earshot/v1/` operations are refused by the socket route table they
/// are served through.)
enum HTTPAccess: Sendable, Equatable {
    /// A client: a bearer key from `[HTTP] KeyFile`, or none when `AllowAnonymous=yes`.
    case client
    /// A metrics scraper: as `[HTTP] TCPMetrics` says (a key, anyone, or nobody).
    case scraper
}

/// The HTTP front's routes, built once at start-up: each (method, path) with who may call it and
/// its handler. A path ending in `*` matches any non-empty rest. One look-up per request phase
/// tells the route, or that the path takes other methods (405 with `Allow`), or that no route
/// serves it (404). Two routes for one method and path are refused when the router is built.
struct HTTPRouter<Handler: Sendable>: Sendable {
    struct Route: Sendable {
        let method: String
        let path: String
        let access: HTTPAccess
        let handle: Handler
    }

    enum Match {
        case found(Route)
        /// The path is served, by these methods only.
        case wrongMethod(allowed: [String])
        case notFound
    }

    /// A method and path registered twice.
    struct DuplicateRoute: Error, CustomStringConvertible {
        let method: String
        let path: String
        var description: String { "two HTTP routes for \(method) \(path)" }
    }

    /// Exact paths: method → route.
    private let exact: [String: [String: Route]]
    /// Prefix paths (`/v1/models/*` → `/v1/models/`), longest first.
    private let prefixes: [(prefix: String, methods: [String: Route])]
    /// Every (method, path) in the order given (what the front serves; tests read it).
    let registered: [(method: String, path: String)]

    init(_ routes: [Route]) throws(DuplicateRoute) {
        var exact: [String: [String: Route]] = [:]
        var prefixes: [String: [String: Route]] = [:]
        for route in routes {
            let isPrefix = route.path.hasSuffix("*")
            let key = isPrefix ? String(route.path.dropLast()) : route.path
            if (isPrefix ? prefixes[key]?[route.method] : exact[key]?[route.method]) != nil {
                throw DuplicateRoute(method: route.method, path: route.path)
            }
            if isPrefix { prefixes[key, default: [:]][route.method] = route } else { exact[key, default: [:]][route.method] = route }
        }
        self.exact = exact
        self.prefixes = prefixes.sorted { $0.key.count > $1.key.count }.map { ($0.key, $0.value) }
        registered = routes.map { ($0.method, $0.path) }
    }

    /// The route for `method` and `path`.
    func match(_ method: String, _ path: String) -> Match {
        let methods = exact[path] ?? prefixes.first { path.hasPrefix($0.prefix) && path.count > $0.prefix.count }?.methods
        guard let methods else { return .notFound }
        guard let route = methods[method] else { return .wrongMethod(allowed: methods.keys.sorted()) }
        return .found(route)
    }

    /// The path pattern `path` is counted under in metrics (`other` when no route serves it).
    func pattern(of path: String) -> String {
        if exact[path] != nil { return path }
        return prefixes.first { path.hasPrefix($0.prefix) && path.count > $0.prefix.count }.map { $0.prefix + "*" } ?? "other"
    }
}
