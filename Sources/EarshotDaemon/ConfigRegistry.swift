import EarshotWire

/// One config key: where it lives, its default, what it means and which values it accepts.
public struct ConfigKey: Sendable {
    public let section: String
    public let name: String
    public let defaultValue: String
    public let doc: String
    let validate: @Sendable (String) -> String?

    /// `Section.Name`.
    public var id: String { "\(section).\(name)" }

    init(_ section: String, _ name: String, _ defaultValue: String, doc: String, validate: @escaping @Sendable (String) -> String? = { _ in nil }) {
        self.section = section
        self.name = name
        self.defaultValue = defaultValue
        self.doc = doc
        self.validate = validate
    }
}

/// Value checks shared by the registry.
enum ConfigValidation {
    static func integer(in range: ClosedRange<Int>) -> @Sendable (String) -> String? {
        { value in
            guard let n = Int(value), range.contains(n) else { return "expected an integer in \(range.lowerBound)...\(range.upperBound)" }
            return nil
        }
    }

    static func seconds(in range: ClosedRange<Double>) -> @Sendable (String) -> String? {
        { value in
            guard let n = Double(value), range.contains(n) else { return "expected seconds in \(range.lowerBound)...\(range.upperBound)" }
            return nil
        }
    }

    static let octalMode: @Sendable (String) -> String? = { value in
        guard let n = Int(value, radix: 8), (0...0o777).contains(n) else { return "expected an octal file mode such as 0660" }
        return nil
    }

    static func oneOf(_ choices: [String]) -> @Sendable (String) -> String? {
        { value in choices.contains(value) ? nil : "expected one of \(choices.joined(separator: ", "))" }
    }

    static let absolutePathOrEmpty: @Sendable (String) -> String? = { value in
        value.isEmpty || value.hasPrefix("/") ? nil : "expected an absolute path"
    }
}

/// Every key earshotd reads: the one authoritative table of defaults. `Config/earshotd.conf` lists
/// the same keys commented out; a test keeps the two in step.
public enum ConfigRegistry {
    public static let keys: [ConfigKey] = [
        ConfigKey("Daemon", "Socket", "", doc: "Listening socket path. Empty: /run/earshot/earshot.sock (system) or $XDG_RUNTIME_DIR/earshot/earshot.sock (--user). Ignored under socket activation.", validate: ConfigValidation.absolutePathOrEmpty),
        ConfigKey("Daemon", "SocketMode", "0666", doc: "File mode of the socket the daemon creates itself. Clients are authorized by peer credentials, so any local user may connect by default.", validate: ConfigValidation.octalMode),
        ConfigKey("Daemon", "StateDirectory", "", doc: "Installed assets and state.db. Empty: $STATE_DIRECTORY (systemd), else /var/lib/earshot or $XDG_STATE_HOME/earshot.", validate: ConfigValidation.absolutePathOrEmpty),
        ConfigKey("Daemon", "CacheDirectory", "", doc: "Partial downloads. Empty: $CACHE_DIRECTORY (systemd), else /var/cache/earshot or $XDG_CACHE_HOME/earshot.", validate: ConfigValidation.absolutePathOrEmpty),
        ConfigKey("Daemon", "AdminGroup", "earshot-admin", doc: "Members of this group (and root, and the daemon's own user) may use admin operations."),
        ConfigKey("Daemon", "LogLevel", "info", doc: "Least severe message logged: debug, info, notice, warning, error.", validate: ConfigValidation.oneOf(LogLevel.allCases.map(\.rawValue))),
        ConfigKey("Daemon", "ShutdownTimeoutSec", "10", doc: "On SIGTERM, how long in-flight requests may run before their connections are closed.", validate: ConfigValidation.seconds(in: 0...3600)),
        ConfigKey("Limits", "MaxConnections", "256", doc: "Most simultaneous client connections; more are refused with insufficientResources.", validate: ConfigValidation.integer(in: 1...65536)),
        ConfigKey("Limits", "MaxHeaderBytes", "\(FrameLimits.default.maxHeaderBytes)", doc: "Longest frame header line a client may send.", validate: ConfigValidation.integer(in: 1024...(1 << 24))),
        ConfigKey("Limits", "MaxDataBytes", "\(FrameLimits.default.maxDataBytes)", doc: "Largest frame data block a client may send.", validate: ConfigValidation.integer(in: 1024...(1 << 28))),
        ConfigKey("Limits", "MaxPayloadBytes", "\(FrameLimits.default.maxPayloadBytes)", doc: "Largest frame payload (audio chunk) a client may send.", validate: ConfigValidation.integer(in: 1024...(1 << 30))),
        ConfigKey("Limits", "OutputStallTimeoutSec", "30", doc: "A client that reads none of its pending output for this long is disconnected.", validate: ConfigValidation.seconds(in: 1...3600)),
    ]

    /// The key `Section.Name`, if registered.
    public static func key(_ id: String) -> ConfigKey? {
        keys.first { $0.id.caseInsensitiveCompare(id) == .orderedSame }
    }
}
