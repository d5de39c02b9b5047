import EarshotSystem
import Foundation

/// Where the daemon keeps its socket, state and cache, by mode: system (`/run`, `/var/lib`,
/// `/var/cache`, or systemd's `RUNTIME_DIRECTORY`/`STATE_DIRECTORY`/`CACHE_DIRECTORY`) or user
/// (XDG base directories).
public struct DaemonPaths: Sendable, Hashable {
    public enum Mode: String, Sendable {
        case system, user
    }

    public var mode: Mode
    public var socket: String
    public var stateDirectory: String
    public var cacheDirectory: String

    /// Default config file for the mode.
    public static func defaultConfigFile(mode: Mode, environment: [String: String]) -> String {
        switch mode {
        case .system: "/etc/earshot/earshotd.conf"
        case .user: xdg("XDG_CONFIG_HOME", ".config", environment) + "/earshot/earshotd.conf"
        }
    }

    /// Default socket for the mode (what clients look for).
    public static func defaultSocket(mode: Mode, environment: [String: String]) -> String {
        switch mode {
        case .system: environment["RUNTIME_DIRECTORY"].flatMap(firstPath).map { $0 + "/earshot.sock" } ?? SocketLocations.system
        case .user: SocketLocations.user(environment: environment)
        }
    }

    /// Resolves every path: explicit flags first, then config, then systemd's or XDG's defaults.
    public static func resolve(mode: Mode, socketFlag: String?, stateFlag: String?, cacheFlag: String?, config: DaemonConfig, environment: [String: String]) -> DaemonPaths {
        func pick(_ flag: String?, _ key: Setting, systemd: String, system: String, xdgVar: String, xdgDefault: String) -> String {
            if let flag { return flag }
            if !config[key].isEmpty { return config[key] }
            switch mode {
            case .system: return environment[systemd].flatMap(firstPath) ?? system
            case .user: return xdg(xdgVar, xdgDefault, environment) + "/earshot"
            }
        }
        let socket = socketFlag ?? (config[.daemonSocket].isEmpty ? defaultSocket(mode: mode, environment: environment) : config[.daemonSocket])
        return DaemonPaths(
            mode: mode,
            socket: socket,
            stateDirectory: pick(stateFlag, .daemonStateDirectory, systemd: "STATE_DIRECTORY", system: "/var/lib/earshot", xdgVar: "XDG_STATE_HOME", xdgDefault: ".local/state"),
            cacheDirectory: pick(cacheFlag, .daemonCacheDirectory, systemd: "CACHE_DIRECTORY", system: "/var/cache/earshot", xdgVar: "XDG_CACHE_HOME", xdgDefault: ".cache"))
    }

    private static func firstPath(_ list: String) -> String? {
        list.split(separator: ":").first.map(String.init)
    }

    private static func xdg(_ variable: String, _ fallback: String, _ environment: [String: String]) -> String {
        if let value = environment[variable], value.hasPrefix("/") { return value }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return home + "/" + fallback
    }
}
