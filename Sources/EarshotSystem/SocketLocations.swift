#if canImport(Glibc)
import Glibc
#endif

/// Where daemons listen by default, shared by the daemon (where to bind) and clients (where to look).
public enum SocketLocations {
    /// The system daemon's socket (systemd's `earshotd.socket`).
    public static let system = "/run/earshot/earshot.sock"

    /// The per-user daemon's socket: `$XDG_RUNTIME_DIR/earshot/earshot.sock`
    /// (`/tmp/earshot-UID/earshot/earshot.sock` when the runtime dir is unset).
    public static func user(environment: [String: String]) -> String {
        let runtime = environment["XDG_RUNTIME_DIR"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? "/tmp/earshot-\(getuid())"
        return runtime + "/earshot/earshot.sock"
    }

    /// Where clients look, in order: `explicit` (`--socket`), `$EARSHOT_SOCKET`, system, user.
    public static func candidates(explicit: String?, environment: [String: String]) -> [String] {
        if let explicit { return [explicit] }
        if let env = environment["EARSHOT_SOCKET"], !env.isEmpty { return [env] }
        return [system, user(environment: environment)]
    }
}
