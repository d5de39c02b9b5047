import CSystemd
import Dispatch
import EarshotSystem
import Foundation

/// systemd, the service manager: readiness and status notifications, the watchdog, and
/// socket-activated listening fds. All no-ops when not run by systemd.
public struct Systemd: Sendable {
    private static let queue = DispatchQueue(label: "earshot.notify")

    public init() {}

    /// Sends `state` (e.g. `READY=1\nSTATUS=…`) to `$NOTIFY_SOCKET` off the caller's thread.
    public func notify(_ state: String) {
        Self.queue.async { _ = sd_notify(0, state) }
    }

    /// Waits until queued notifications are sent.
    public func flush() {
        Self.queue.sync {}
    }

    /// The watchdog interval systemd expects pings within, if the watchdog is enabled for us.
    public var watchdogInterval: Duration? {
        var usec: UInt64 = 0
        guard sd_watchdog_enabled(0, &usec) > 0, usec > 0 else { return nil }
        return .microseconds(Int64(usec))
    }

    /// Listening fds passed by socket activation (`LISTEN_FDS`), unset from the environment.
    public func activatedSockets() -> [Int32] {
        let count = sd_listen_fds(1)
        guard count > 0 else { return [] }
        return (0..<count).map { SD_LISTEN_FDS_START + $0 }
    }

    /// Whether `fd` is a listening Unix stream socket.
    public func isListeningUnixStream(_ fd: Int32) -> Bool {
        sd_is_socket_unix(fd, Int32(SOCK_STREAM.rawValue), 1, nil, 0) > 0
    }

    /// The systemd version linked in (from libsystemd's package note).
    public static var linkedLibrary: LinkedLibrary { .identify(sharedObject: "libsystemd.so", name: "systemd") }
}
