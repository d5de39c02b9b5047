#if canImport(Glibc)
import Glibc
#endif

/// Where daemons listen by default, shared by the daemon (where to bind) and clients (where to look).
public enum SocketLocations {
    /// The system daemon's socket (systemd's `earshotd.socket`).
    public static let system = "/run/earshot/earshot.sock"

    /// The per-user runtime directory: `$XDG_RUNTIME_DIR` (the session manager's), or, when it is
    /// unset, Earshot's own fallback `${TMPDIR:-/tmp}/earshot-UID` (`isFallback`).
    public static func userRuntimeDirectory(environment: [String: String]) -> (path: String, isFallback: Bool) {
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") { return (runtime, false) }
        let temporary = environment["TMPDIR"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? "/tmp"
        return ("\(temporary)/earshot-\(getuid())", true)
    }

    /// The per-user daemon's socket: `$XDG_RUNTIME_DIR/earshot/earshot.sock`
    /// (`${TMPDIR:-/tmp}/earshot-UID/earshot/earshot.sock` when the runtime dir is unset).
    public static func user(environment: [String: String]) -> String {
        userRuntimeDirectory(environment: environment).path + "/earshot/earshot.sock"
    }

    /// The directories the user socket lives in, outermost first, each with the permission bits
    /// group and others must not have: the runtime directory (`$XDG_RUNTIME_DIR` only must not be
    /// writable by them; the fallback, which Earshot creates, must be 0700) and `earshot/` (0700).
    static func userSocketDirectories(environment: [String: String]) -> [(path: String, forbidden: mode_t)] {
        let runtime = userRuntimeDirectory(environment: environment)
        return [(runtime.path, runtime.isFallback ? 0o077 : 0o022), (runtime.path + "/earshot", 0o077)]
    }

    /// For the user daemon: makes sure the user socket's directories are this user's own (not a
    /// symlink, owned by the effective uid, closed to others), creating missing ones with mode
    /// 0700. Throws on a pre-existing directory that fails the check: nothing is created in it.
    public static func prepareUserSocketDirectory(environment: [String: String]) throws(SecureDirectoryError) {
        for directory in userSocketDirectories(environment: environment) {
            try SecureDirectory.ensure(directory.path, forbidden: directory.forbidden)
        }
    }

    /// For clients: the same check without creating anything. False when a directory does not
    /// exist (no user daemon has run); throws when one exists and fails the check.
    public static func checkUserSocketDirectory(environment: [String: String]) throws(SecureDirectoryError) -> Bool {
        for directory in userSocketDirectories(environment: environment) {
            guard try SecureDirectory.check(directory.path, forbidden: directory.forbidden) else { return false }
        }
        return true
    }

    /// Where clients look, in order: `explicit` (`--socket`), `$EARSHOT_SOCKET`, system, user.
    public static func candidates(explicit: String?, environment: [String: String]) -> [String] {
        if let explicit { return [explicit] }
        if let env = environment["EARSHOT_SOCKET"], !env.isEmpty { return [env] }
        return [system, user(environment: environment)]
    }
}
