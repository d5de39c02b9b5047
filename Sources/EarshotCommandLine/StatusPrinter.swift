import EarshotWire
import Foundation

/// The human-readable form of `earshot.status.result`, shared by `earshot` and `earshotctl`.
public enum StatusPrinter {
    public static func print(_ status: DaemonStatus) {
        Output.fields([
            ("daemon", "earshotd \(status.daemonVersion) (protocol \(status.protocolVersion), pid \(status.pid), \(status.mode) mode)"),
            ("socket", (status.socketPath ?? "unknown") + (status.socketActivated ? " (socket activation)" : "")),
            ("uptime", Output.duration(status.uptimeSeconds)),
            ("connections", "\(status.connections) open, \(status.connectionsTotal) since start (limit \(status.limits.maxConnections))"),
            ("frame limits", "header \(status.limits.frame.maxHeaderBytes) B, data \(status.limits.frame.maxDataBytes) B, payload \(status.limits.frame.maxPayloadBytes) B"),
        ] + (status.lastUpdate.map { [("last update", "\(time($0.finishedAt)) by \($0.requestedBy): \($0.outcome) (\($0.summary))")] } ?? []))
        guard let assets = status.assets, !assets.isEmpty else { return }
        Swift.print("")
        Output.table(["ASSET", "INSTALLED", "AVAILABLE", "HELD", "PREVIOUS"], assets.map { asset in
            let previous = asset.previous.map { version in "\(version)" + (asset.previousKeptUntil.map { " (kept until \(time($0)))" } ?? "") }
            return [asset.id, asset.installed.map(String.init) ?? "-", asset.available.map(String.init) ?? "-", asset.held.map(String.init) ?? "-", previous ?? "-"]
        })
    }

    /// Wall-clock seconds as an ISO 8601 UTC time.
    private static func time(_ seconds: Double) -> String {
        Date(timeIntervalSince1970: seconds).formatted(.iso8601)
    }
}
