import EarshotWire

/// The human-readable form of `earshot.status.result`, shared by `earshot` and `earshotctl`.
public enum StatusPrinter {
    public static func print(_ status: DaemonStatus) {
        Output.fields([
            ("daemon", "earshotd \(status.daemonVersion) (protocol \(status.protocolVersion), pid \(status.pid), \(status.mode) mode)"),
            ("socket", (status.socketPath ?? "unknown") + (status.socketActivated ? " (socket activation)" : "")),
            ("uptime", Output.duration(status.uptimeSeconds)),
            ("connections", "\(status.connections) open, \(status.connectionsTotal) since start (limit \(status.limits.maxConnections))"),
            ("frame limits", "header \(status.limits.frame.maxHeaderBytes) B, data \(status.limits.frame.maxDataBytes) B, payload \(status.limits.frame.maxPayloadBytes) B"),
        ])
    }
}
