import EarshotSystem
import Foundation

/// A private zeroconf stack for tests: Debian's `dbus-daemon` on a bus socket of its own, and
/// `avahi-daemon` on that bus in a mount namespace of its own (its pid file directory is bind-
/// mounted from the temp dir, so a system avahi, if any, is not disturbed). Clients find it through
/// ``environment`` (`DBUS_SYSTEM_BUS_ADDRESS`); ``browse(_:)`` watches it with `avahi-browse`.
/// ``init(avahi:)`` can start the bus alone, ``startAvahi()`` avahi later. Needs root.
public final class AvahiDaemon: @unchecked Sendable {
    public static let tools = ["/usr/bin/dbus-daemon", "/usr/sbin/avahi-daemon", "/usr/bin/avahi-browse", "/usr/bin/unshare"]
    /// Whether the tools are installed (Scripts/setup.sh installs them).
    public static var available: Bool { tools.allSatisfy { FileManager.default.isExecutableFile(atPath: $0) } }

    public struct StartError: Error, CustomStringConvertible {
        public var description: String
    }

    /// One resolved service as `avahi-browse -p` prints it.
    public struct Service: Sendable, Hashable {
        public var interface: String
        public var name: String
        public var type: String
        public var address: String
        public var port: UInt16
    }

    public let directory: TempDirectory
    private let bus: ChildProcess
    /// Points D-Bus clients (avahi-client, avahi-browse) at this bus.
    public var environment: [String: String?] { ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=" + directory.file("bus.sock")] }

    /// Starts the bus in a new temp dir (removed at ``stop()``), then, with `avahi`, avahi-daemon
    /// on it (``startAvahi()``).
    public init(avahi startsAvahi: Bool = true) async throws {
        let directory = try TempDirectory("avahi")
        self.directory = directory
        let busConfig = try directory.write("bus.conf", """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>system</type>
              <listen>unix:path=\(directory.file("bus.sock"))</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow user="*"/>
                <allow own="*"/>
                <allow send_destination="*"/>
                <allow receive_sender="*"/>
              </policy>
            </busconfig>
            """)
        bus = try ChildProcess("/usr/bin/dbus-daemon", ["--config-file=\(busConfig)", "--nofork", "--print-address"], in: directory, name: "dbus")
        do {
            try await Self.waitUntil(timeout: .seconds(10)) { [bus] in !bus.stdout.isEmpty || !bus.process.isRunning }
            guard bus.process.isRunning else { throw StartError(description: "dbus-daemon exited: \(bus.stderr)") }
            if startsAvahi { try await startAvahi() }
        } catch {
            await stop()
            throw error
        }
    }

    /// Starts avahi-daemon on the bus; returns once it reports its startup complete. It runs
    /// daemonized (`-D`), not as this process's child: Foundation's `Process` stops reaping the
    /// test's other children while avahi-daemon is one of them (seen with swift-corelibs-foundation
    /// of Swift 6).

    public func startAvahi() async throws {
        let config = try directory.write("avahi-daemon.conf", """
            [server]
            use-ipv4=yes
            use-ipv6=no
            enable-dbus=yes
            [wide-area]
            enable-wide-area=no
            [publish]
            publish-hinfo=no
            publish-workstation=no
            """)
        let runtime = directory.file("run")
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
        let script = "mkdir -p /run/avahi-daemon && mount --bind \"$1\" /run/avahi-daemon && exec /usr/sbin/avahi-daemon -D -f \"$2\" --no-drop-root --no-chroot --no-rlimits --no-proc-title"
        let start = try await ChildProcess.run("/usr/bin/unshare", ["-m", "/bin/sh", "-c", script, "sh", runtime, config], environment: environment, in: directory, timeout: .seconds(30))
        guard start.status == 0 else { throw StartError(description: "avahi-daemon -D failed: \(start.stderr)") }
    }

    /// avahi-daemon's pid (its pid file), while it runs.
    private var avahiPID: pid_t? {
        (try? String(contentsOfFile: directory.file("run/pid"), encoding: .utf8)).flatMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    /// The first IPv4 address of an interface that is up and multicast-capable (one avahi uses).
    public static func multicastIPv4Address() -> String? {
        NetworkInterfaces.addresses().first { $0.isIPv4 && $0.isUp && $0.isMulticast && !$0.isLoopback }?.address
    }

    /// A running `avahi-browse -rp TYPE`: every service it resolves and every removal it sees.
    public final class Browser: Sendable {
        let child: ChildProcess

        init(_ child: ChildProcess) { self.child = child }

        /// Resolved services (`=` lines) so far.
        public var resolved: [Service] { lines("=").compactMap { fields in
            guard fields.count >= 9, let port = UInt16(fields[8]) else { return nil }
            return Service(interface: fields[1], name: fields[3], type: fields[4], address: fields[7], port: port)
        } }

        /// Names of services withdrawn (`-` lines) so far.
        public var removed: [String] { lines("-").compactMap { $0.count > 3 ? $0[3] : nil } }

        // =;eth0;IPv4;NAME;TYPE;local;HOST;ADDRESS;PORT;TXT
        private func lines(_ kind: String) -> [[String]] {
            child.stdout.split(separator: "\n").map { $0.split(separator: ";", omittingEmptySubsequences: false).map(String.init) }.filter { $0.first == kind }
        }

        /// Polls until `condition` holds; throws after `timeout` with what was seen.
        public func wait(timeout: Duration = .seconds(20), until condition: (Browser) -> Bool) async throws {
            let deadline = ContinuousClock.now + timeout
            while !condition(self) {
                guard ContinuousClock.now < deadline, child.process.isRunning else {
                    throw StartError(description: "avahi-browse did not see it within \(timeout): \(child.stdout) \(child.stderr)")
                }
                try await Task.sleep(for: .milliseconds(50))
            }
        }

        public func stop() async { await child.stop() }
    }

    /// Starts browsing for `type` (resolving what it finds) until ``Browser/stop()``.
    public func browse(_ type: String) throws -> Browser {
        Browser(try ChildProcess("/usr/bin/avahi-browse", ["-rp", type], environment: environment, in: directory, name: "avahi-browse"))
    }

    /// Stops avahi (it withdraws what it announced), then the bus, and removes the directory.
    public func stop() async {
        await stopAvahi()
        bus.signal(SIGTERM)
        if await bus.wait(timeout: .seconds(10)) == nil { await bus.stop() }
        directory.remove()
    }

    /// Stops avahi-daemon (it withdraws what it announced); the bus stays.
    public func stopAvahi() async {
        guard let pid = avahiPID, kill(pid, SIGTERM) == 0 else { return }
        // Gone (or a zombie of its new parent) once it has withdrawn everything and exited.
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline, kill(pid, 0) == 0, !Self.isZombie(pid) {
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    private static func isZombie(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return true }
        return stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
    }

    private static func waitUntil(timeout: Duration, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while !condition() {
            guard ContinuousClock.now < deadline else { throw StartError(description: "not ready within \(timeout)") }
            try await Task.sleep(for: .milliseconds(50))
        }
    }
}
