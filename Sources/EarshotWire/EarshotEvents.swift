/// Earshot's own events (`earshot.*`). Requests carry an `id` that the reply (`<type>.result`) or
/// an `error` echoes.

/// `earshot.hello`: the client introduces itself; answered by ``Welcome``.
public struct Hello: WireEvent, Hashable {
    public static let eventType = "earshot.hello"
    public var id: String?
    /// Highest Earshot protocol version the client speaks.
    public var protocolVersion: Int
    /// Reverse-DNS app identifier; reservations are kept per (uid, app id).
    public var appId: String
    public init(id: String? = nil, protocolVersion: Int = WireProtocol.earshotVersion, appId: String) {
        self.id = id
        self.protocolVersion = protocolVersion
        self.appId = appId
    }
    enum CodingKeys: String, CodingKey {
        case id, protocolVersion = "protocol_version", appId = "app_id"
    }
}

/// Limits the daemon enforces, as announced in ``Welcome`` and ``DaemonStatus``.
public struct DaemonLimits: Codable, Sendable, Hashable {
    public var frame: FrameLimits
    /// Most simultaneous client connections.
    public var maxConnections: Int
    public init(frame: FrameLimits, maxConnections: Int) {
        self.frame = frame
        self.maxConnections = maxConnections
    }
    enum CodingKeys: String, CodingKey { case frame, maxConnections = "max_connections" }
}

/// `earshot.welcome`: the daemon's answer to ``Hello``.
public struct Welcome: WireEvent, Hashable {
    public static let eventType = "earshot.welcome"
    public var id: String?
    /// The protocol version both sides will speak.
    public var protocolVersion: Int
    public var daemonVersion: String
    public var limits: DaemonLimits
    /// Feature names the daemon offers (e.g. `wyoming-asr`).
    public var capabilities: [String]
    /// The peer as the daemon sees it.
    public var uid: UInt32
    /// Whether the peer may use admin operations.
    public var admin: Bool
    /// How many locales this app may reserve (`maximumReservedLocales`).
    public var maxReservedLocales: Int?
    public init(id: String?, protocolVersion: Int, daemonVersion: String, limits: DaemonLimits, capabilities: [String], uid: UInt32, admin: Bool, maxReservedLocales: Int? = nil) {
        self.id = id
        self.protocolVersion = protocolVersion
        self.daemonVersion = daemonVersion
        self.limits = limits
        self.capabilities = capabilities
        self.uid = uid
        self.admin = admin
        self.maxReservedLocales = maxReservedLocales
    }
    enum CodingKeys: String, CodingKey {
        case id, protocolVersion = "protocol_version", daemonVersion = "daemon_version", limits, capabilities, uid, admin
        case maxReservedLocales = "max_reserved_locales"
    }
}

/// `earshot.status`: asks for the daemon's status; answered by ``DaemonStatus``.
public struct StatusRequest: WireEvent, Hashable {
    public static let eventType = "earshot.status"
    public var id: String?
    public init(id: String? = nil) { self.id = id }
}

/// `earshot.status.result`: daemon version, uptime, connections and limits; for admins also the
/// installed assets' versions and the last update run.
public struct DaemonStatus: WireEvent, Hashable {
    public static let eventType = "earshot.status.result"
    public var id: String?
    public var daemonVersion: String
    public var protocolVersion: Int
    public var pid: Int32
    /// Seconds since the daemon started listening.
    public var uptimeSeconds: Double
    /// Open client connections, this one included.
    public var connections: Int
    /// Connections accepted since start.
    public var connectionsTotal: Int
    /// `system` or `user`.
    public var mode: String
    /// Whether the listening socket came from systemd socket activation.
    public var socketActivated: Bool
    public var socketPath: String?
    public var limits: DaemonLimits
    /// Admins only (nil for others): every installed asset's installed, available, held and
    /// previous versions.
    public var assets: [AssetVersionsInfo]?
    /// Admins only: the last real update run, when there was one.
    public var lastUpdate: UpdateRunInfo?
    public init(id: String?, daemonVersion: String, protocolVersion: Int, pid: Int32, uptimeSeconds: Double, connections: Int, connectionsTotal: Int, mode: String, socketActivated: Bool, socketPath: String?, limits: DaemonLimits,
                assets: [AssetVersionsInfo]? = nil, lastUpdate: UpdateRunInfo? = nil) {
        self.assets = assets
        self.lastUpdate = lastUpdate
        self.id = id
        self.daemonVersion = daemonVersion
        self.protocolVersion = protocolVersion
        self.pid = pid
        self.uptimeSeconds = uptimeSeconds
        self.connections = connections
        self.connectionsTotal = connectionsTotal
        self.mode = mode
        self.socketActivated = socketActivated
        self.socketPath = socketPath
        self.limits = limits
    }
    enum CodingKeys: String, CodingKey {
        case id, daemonVersion = "daemon_version", protocolVersion = "protocol_version", pid
        case uptimeSeconds = "uptime_seconds", connections, connectionsTotal = "connections_total", mode
        case socketActivated = "socket_activated", socketPath = "socket_path", limits, assets, lastUpdate = "last_update"
    }
}

/// `earshot.config`: asks for every config key with its default and effective value.
public struct ConfigRequest: WireEvent, Hashable {
    public static let eventType = "earshot.config"
    public var id: String?
    public init(id: String? = nil) { self.id = id }
}

/// One config key as reported by ``ConfigReport``.
public struct ConfigEntry: Codable, Sendable, Hashable {
    /// `Section.Key`.
    public var key: String
    public var defaultValue: String
    /// The effective value.
    public var value: String
    /// Where the effective value came from: `default`, `file:line`, or `command line`.
    public var source: String
    public var doc: String
    public init(key: String, defaultValue: String, value: String, source: String, doc: String) {
        self.key = key
        self.defaultValue = defaultValue
        self.value = value
        self.source = source
        self.doc = doc
    }
    enum CodingKeys: String, CodingKey { case key, defaultValue = "default", value, source, doc }
}

/// `earshot.config.result`: the daemon's effective configuration.
public struct ConfigReport: WireEvent, Hashable {
    public static let eventType = "earshot.config.result"
    public var id: String?
    public var entries: [ConfigEntry]
    /// Warnings from loading the config (unknown keys, bad values) with file:line.
    public var warnings: [String]
    public init(id: String?, entries: [ConfigEntry], warnings: [String]) {
        self.id = id
        self.entries = entries
        self.warnings = warnings
    }
}
