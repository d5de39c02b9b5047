import EarshotSystem
import EarshotWire
import Foundation

/// How the daemon reaches registries: the credentials file and the hosts that may go without TLS.
public struct RegistrySettings: Sendable, Hashable {
    /// `[Registry] AuthFile`: credentials in the `auths` format of `~/.docker/config.json`; nil: anonymous.
    public var authFile: String?
    /// `[Registry] PlainHTTPHosts`: authorities (`host` or `host:port`) that, besides loopback,
    /// may be reached over plain HTTP when they do not speak TLS.
    public var plainHTTPHosts: [String]

    public init(authFile: String? = nil, plainHTTPHosts: [String] = []) {
        self.authFile = authFile
        self.plainHTTPHosts = plainHTTPHosts
    }
}

/// Speaks the OCI distribution API to one or more registries: anonymous, HTTP basic and the
/// Distribution bearer-token flow (`WWW-Authenticate: Bearer realm,service,scope` → token →
/// retry), with tokens kept per host and scope in memory only. Credentials go only to the
/// authority the file names them for: a token realm on another host gets that host's own entry or
/// none (an anonymous token request), never the registry's. Every exchange runs on its own thread.
public final class RegistryClient: Sendable {
    public let settings: RegistrySettings
    let options: DownloadOptions
    let userAgent: String
    /// Size of one `PATCH` of a chunked upload: what a push holds in memory at a time.
    let uploadChunkBytes: Int
    /// Paces the backoff between upload attempts.
    let clock: any ServiceClock
    private let tokens = LockedValues()
    /// `http` or `https` for each host allowed plain HTTP, once asked.
    private let schemes = LockedValues()

    /// `options` gives timeouts, the CA file and attempts per upload chunk; `clock` paces the backoff.
    public init(settings: RegistrySettings, options: DownloadOptions, userAgent: String = "earshotd/\(EarshotVersion.string)",
                uploadChunkBytes: Int = 8 << 20, clock: any ServiceClock = SystemServiceClock()) {
        self.settings = settings
        self.options = options
        self.userAgent = userAgent
        self.uploadChunkBytes = max(1, uploadChunkBytes)
        self.clock = clock
    }

    /// Whether `authority` may be reached over plain HTTP: loopback, or listed by the admin.
    public func usesPlainHTTP(_ authority: String) -> Bool {
        let name = OCIReference.hostName(of: authority)
        if name == "localhost" || name == "::1" || name.hasPrefix("127.") { return true }
        return settings.plainHTTPHosts.contains { $0.lowercased() == authority.lowercased() || $0.lowercased() == name }
    }

    /// `https://host[:port]/v2/<repository>/`, or `http://` for a host allowed plain HTTP
    /// (loopback, `[Registry] PlainHTTPHosts`) that does not speak TLS.
    func base(_ reference: OCIReference) async -> String {
        "\(await scheme(reference.host))://\(reference.host)/v2/\(reference.repository)/"
    }

    /// HTTPS, unless `authority` may go without TLS and its `/v2/` answers a TLS handshake with
    /// plain HTTP (asked once per daemon run, as Docker does for insecure registries). A failed
    /// certificate check is never a reason to drop TLS.
    func scheme(_ authority: String) async -> String {
        guard usesPlainHTTP(authority) else { return "https" }
        if let known = schemes.get(authority) { return known }
        let probe = MemoryRequest(method: "GET", url: "https://\(authority)/v2/")
        let outcome = await BlockingWork.run("earshot.registry") { self.exchange(probe) }
        switch outcome {
        case .success:
            schemes.set(authority, "https")
            return "https"
        case .failure(.transport(_, .curl(code: 35, _))): // CURLE_SSL_CONNECT_ERROR: no TLS there
            schemes.set(authority, "http")
            return "http"
        case .failure:
            return "https" // unreachable now: ask again next time
        }
    }

    /// What redirects from `reference`'s registry may switch to: HTTPS only, once it speaks TLS.
    func redirectProtocols(_ reference: OCIReference) async -> String {
        await scheme(reference.host) == "https" ? "https" : "http,https"
    }

    static func scope(_ reference: OCIReference, push: Bool) -> String { "repository:\(reference.repository):\(push ? "pull,push" : "pull")" }

    /// The credentials file's entries (read each time, so an admin's edit applies at once).
    func credentials() throws(RegistryError) -> [String: RegistryCredentials] {
        guard let path = settings.authFile, !path.isEmpty else { return [:] }
        return try RegistryAuthFile.load(path)
    }

    // MARK: - Authenticated exchange (blocking)

    /// The response headers a registry client reads.
    static let headerNames = ["www-authenticate", "docker-content-digest", "location", "range", "content-type", "content-length", "etag"]

    /// One exchange, its failures as registry errors: a body past its limit is a registry that
    /// sent more than it announced.
    func exchange(_ request: MemoryRequest) -> Result<MemoryResponse, RegistryError> {
        var request = request
        request.headerNames = Self.headerNames
        switch MemoryExchange.perform(request, options: options, userAgent: userAgent) {
        case .response(let response): return .success(response)
        case .failure(.tooLarge): return .failure(.mismatch("\(request.url) sent more than \(request.maxResponseBytes) bytes"))
        case .failure(let reason): return .failure(.transport(url: request.url, reason))
        }
    }

    /// Sends `request` to `reference`'s registry, answering one `401` challenge with basic
    /// credentials or a bearer token, and remembering what worked for the next request.
    func send(_ request: MemoryRequest, to reference: OCIReference, push: Bool = false) -> Result<MemoryResponse, RegistryError> {
        let scope = Self.scope(reference, push: push)
        let key = reference.host.lowercased() + " " + scope
        // An upload location on another host gets no authorization of this registry's.
        guard Self.authority(of: request.url) == reference.host.lowercased() else {
            return exchange(request)
        }
        var attempt = request
        let cached = tokens.get(key)
        if let cached { attempt.headers.append("Authorization: " + cached) }
        let first = exchange(attempt)
        guard case .success(let response) = first, response.status == 401 else { return first }
        tokens.remove(key)
        let authorization: String
        switch authorize(RegistryChallenge.parse(response.headers["www-authenticate"] ?? []), reference: reference, scope: scope) {
        case .success(let value): authorization = value
        case .failure(let error): return .failure(error)
        }
        var retry = request
        retry.headers.append("Authorization: " + authorization)
        let second = exchange(retry)
        if case .success(let answer) = second {
            if answer.status == 401 { return .failure(.unauthorized(host: reference.host, "the credentials were refused")) }
            tokens.set(key, authorization)
        }
        return second
    }

    /// The `Authorization` value that answers `challenges`.
    private func authorize(_ challenges: [RegistryChallenge], reference: OCIReference, scope: String) -> Result<String, RegistryError> {
        let known: [String: RegistryCredentials]
        do { known = try credentials() } catch { return .failure(error) }
        let mine = known[reference.host.lowercased()]
        if let bearer = challenges.first(where: { $0.scheme == "bearer" }) {
            return token(bearer, reference: reference, scope: scope, known: known).map { "Bearer " + $0 }
        }
        if challenges.contains(where: { $0.scheme == "basic" }) {
            guard let mine else { return .failure(.unauthorized(host: reference.host, "it asks for credentials and [Registry] AuthFile has none for it")) }
            return .success(mine.basicAuthorization)
        }
        return .failure(.unauthorized(host: reference.host, "no Bearer or Basic challenge in its 401 answer"))
    }

    /// Asks the challenge's realm for a token.
    private func token(_ challenge: RegistryChallenge, reference: OCIReference, scope: String, known: [String: RegistryCredentials]) -> Result<String, RegistryError> {
        guard let realm = challenge.parameters["realm"], var components = URLComponents(string: realm),
              let scheme = components.scheme?.lowercased(), let realmHost = components.host else {
            return .failure(.unauthorized(host: reference.host, "its Bearer challenge has no usable realm"))
        }
        let realmAuthority = (realmHost.contains(":") ? "[\(realmHost)]" : realmHost).lowercased() + (components.port.map { ":\($0)" } ?? "")
        guard scheme == "https" || (scheme == "http" && usesPlainHTTP(realmAuthority)) else {
            return .failure(.plainHTTPRefused(host: realmAuthority))
        }
        var query = components.queryItems ?? []
        if let service = challenge.parameters["service"] { query.append(URLQueryItem(name: "service", value: service)) }
        query.append(URLQueryItem(name: "scope", value: challenge.parameters["scope"] ?? scope))
        components.queryItems = query
        guard let url = components.string else { return .failure(.unauthorized(host: reference.host, "its token realm is not a URL")) }
        // Only the realm's own entry: a registry cannot send our credentials elsewhere.
        let credentials = known[realmAuthority]
        var request = MemoryRequest(method: "GET", url: url, redirectProtocols: usesPlainHTTP(realmAuthority) ? "http,https" : "https")
        if let credentials { request.headers.append("Authorization: " + credentials.basicAuthorization) }
        switch exchange(request) {
        case .failure(let error):
            return .failure(error)
        case .success(let response) where response.status == 401 || response.status == 403:
            return .failure(.unauthorized(host: reference.host, credentials == nil ? "its token service wants credentials and none are configured for \(realmAuthority)"
                                                                                     : "its token service refused the credentials"))
        case .success(let response) where response.status != 200:
            return .failure(.status(url: realm, response.status, "token request"))
        case .success(let response):
            let object = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any]
            guard let token = (object?["token"] as? String) ?? (object?["access_token"] as? String), !token.isEmpty,
                  token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
                return .failure(.unauthorized(host: reference.host, "its token service answered without a token"))
            }
            return .success(token)
        }
    }

    /// `host[:port]` of an http(s) URL, lower-cased.
    static func authority(of url: String) -> String {
        guard let scheme = url.range(of: "://") else { return "" }
        let rest = url[scheme.upperBound...]
        return String(rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }).lowercased()
    }

    /// The `Authorization` value that last worked for `reference`'s repository, if one was needed.
    func authorization(_ reference: OCIReference, push: Bool) -> String? {
        tokens.get(reference.host.lowercased() + " " + Self.scope(reference, push: push))
    }

    /// Runs a blocking exchange on its own thread.
    func run(_ request: MemoryRequest, to reference: OCIReference, push: Bool = false) async -> Result<MemoryResponse, RegistryError> {
        await BlockingWork.run("earshot.registry") { self.send(request, to: reference, push: push) }
    }
}

/// Strings by key behind a lock: authorization values that worked, by `host scope` (memory only:
/// never stored, never logged), and the scheme of each plain-HTTP-allowed host.
private final class LockedValues: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [String: String] = [:]

    func get(_ key: String) -> String? { lock.withLock { values[key] } }
    func set(_ key: String, _ value: String) { lock.withLock { values[key] = value } }
    func remove(_ key: String) { lock.withLock { _ = values.removeValue(forKey: key) } }
}
