/// Why talking to an OCI registry failed. Credentials and tokens never appear in these texts.
public enum RegistryError: Error, Sendable, Hashable, CustomStringConvertible {
    /// An `oci://` reference that does not parse; the second value says which part.
    case invalidReference(String, String)
    /// The registry could not be reached or the exchange broke (DNS, connect, TLS, timeouts, a
    /// 5xx, redirect loops): libcurl's or the server's reason.
    case transport(url: String, MirrorFailure.Reason)
    /// The registry refused our credentials, or asked for some and none are configured for it.
    case unauthorized(host: String, String)
    /// The registry answered with a status this step does not accept (`404` for a missing tag…).
    case status(url: String, Int, String)
    /// What the registry sent does not match what was asked for: a digest, a size, a media type.
    case mismatch(String)
    /// A manifest that is not an Earshot catalog artifact (or not valid JSON).
    case notACatalog(String)
    /// The credentials file cannot be used; the text says why (ownership, mode, JSON).
    case authFile(path: String, String)
    /// Plain HTTP to a host that is neither loopback nor listed in `[Registry] PlainHTTPHosts`,
    /// or an HTTPS registry's upload sent on to a plain-HTTP location.
    case plainHTTPRefused(host: String)
    /// Reading the local file to upload failed.
    case io(String)

    /// Worth trying again later: the registry was unreachable or briefly failing.
    public var isTransient: Bool {
        if case .transport(_, let reason) = self { return reason.isTransient }
        return false
    }

    public var description: String {
        switch self {
        case .invalidReference(let text, let why): "invalid OCI reference \"\(text)\": \(why)"
        case .transport(let url, let reason): "\(url): \(reason)"
        case .unauthorized(let host, let why): "registry \(host) refused access: \(why)"
        case .status(let url, let status, let message): "\(url): HTTP \(status)\(message.isEmpty ? "" : " (\(message))")"
        case .mismatch(let what): "registry content does not verify: \(what)"
        case .notACatalog(let why): "not an Earshot catalog artifact: \(why)"
        case .authFile(let path, let why): "registry credentials file \(path): \(why)"
        case .plainHTTPRefused(let host): "plain HTTP to \(host) is refused: only loopback and the hosts in [Registry] PlainHTTPHosts may go without TLS, and never after TLS"
        case .io(let what): what
        }
    }
}
