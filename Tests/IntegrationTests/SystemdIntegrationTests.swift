import EarshotSystem
import EarshotWire
import Foundation
import Testing
import TestSupport

/// The daemon as systemd runs it: readiness, watchdog, socket activation, signals, socket takeover.
@Suite struct SystemdIntegrationTests {
    @Test func sigtermWithOpenConnectionsExitsZeroAndRemovesTheSocket() async throws {
        let daemon = try await TestDaemon()
        defer { Task { await daemon.cleanUp() } }
        let idle = try TestConnection(daemon.socket)
        #expect(try #require(try await idle.roundTrip(Ping())).type == Pong.eventType)
        #expect(await daemon.terminate() == 0)
        #expect(try await idle.next() == nil) // the daemon closed the idle connection
        #expect(!FileManager.default.fileExists(atPath: daemon.socket))
        #expect(daemon.child.stderr.contains("earshotd stopped"))
    }

    @Test func notifiesReadyStatusAndStopping() async throws {
        let dir = try TempDirectory()
        defer { dir.remove() }
        let notify = try NotifyListener(in: dir)
        let daemon = try await TestDaemon(environment: ["NOTIFY_SOCKET": notify.path])
        defer { Task { await daemon.cleanUp() } }
        let ready = try #require(await notify.wait(for: "READY=1"))
        #expect(ready.contains { $0.contains("STATUS=Listening on \(daemon.socket)") })
        #expect(ready.contains { $0.contains("MAINPID=\(daemon.child.pid)") })
        #expect(await daemon.terminate() == 0)
        #expect(await notify.wait(for: "STOPPING=1") != nil)
    }

    /// The watchdog is wired to systemd's interval: pings at half of it (the beat itself runs on
    /// the injected clock: ServiceGroupTests.theHeartbeatProbesOnTheInjectedClockWhileTheGroupRuns).
    @Test func pingsTheWatchdogAtHalfTheInterval() async throws {
        let dir = try TempDirectory()
        defer { dir.remove() }
        let notify = try NotifyListener(in: dir)
        let daemon = try await TestDaemon(environment: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "200000"])
        defer { Task { await daemon.cleanUp() } }
        _ = await notify.wait(for: "READY=1")
        #expect(daemon.child.stderr.contains("watchdog=every 100 ms"), "\(daemon.child.stderr)")
        #expect(await notify.wait(for: "WATCHDOG=1", count: 3) != nil, "pings keep coming")
        #expect(await daemon.terminate() == 0)
    }

    @Test func noWatchdogPingsWhenTheWatchdogIsOff() async throws {
        let dir = try TempDirectory()
        defer { dir.remove() }
        let notify = try NotifyListener(in: dir)
        let daemon = try await TestDaemon(environment: ["NOTIFY_SOCKET": notify.path])
        defer { Task { await daemon.cleanUp() } }
        _ = await notify.wait(for: "READY=1")
        #expect(daemon.child.stderr.contains("watchdog=off"), "\(daemon.child.stderr)")
        #expect(!notify.messages().contains { $0.contains("WATCHDOG=1") })
    }

    @Test func servesASocketActivatedListener() async throws {
        let dir = try TempDirectory()
        defer { dir.remove() }
        let socket = dir.file("activated.sock")
        let activator = try ChildProcess("/usr/bin/systemd-socket-activate",
                                         ["-l", socket, BuiltProducts.path("earshotd"), "--user", "--state-dir", dir.file("state"), "--cache-dir", dir.file("cache"), "--config", dir.file("none.conf")],
                                         in: dir)
        defer { Task { await activator.stop() } }
        try await TestDaemon.waitForSocket(socket, process: activator)
        let client = try TestConnection(socket)
        let status = try #require(try await client.roundTrip(StatusRequest(id: "s"))).decode(DaemonStatus.self)
        #expect(status.socketActivated)
        #expect(status.socketPath == socket)
        #expect(status.pid == activator.pid) // systemd-socket-activate execs the daemon in place
        client.close()
        kill(status.pid, SIGTERM)
        #expect(await activator.wait() == 0)
    }

    @Test func replacesAStaleSocketButRefusesALiveDaemon() async throws {
        let first = try await TestDaemon()
        defer { Task { await first.cleanUp() } }
        // A second daemon on the same socket must refuse to start while the first answers.
        let second = try await ChildProcess.run(BuiltProducts.path("earshotd"),
                                                ["--user", "--socket", first.socket, "--state-dir", first.directory.file("s2"), "--cache-dir", first.directory.file("c2"), "--config", first.directory.file("none.conf")],
                                                in: first.directory)
        #expect(second.status == 1)
        #expect(second.stderr.contains("another earshotd already answers on \(first.socket)"))
        // Killed without cleanup, the first leaves a stale socket file; a new daemon takes it over.
        first.child.signal(SIGKILL)
        _ = await first.child.wait()
        #expect(FileManager.default.fileExists(atPath: first.socket))
        let third = try ChildProcess(BuiltProducts.path("earshotd"),
                                     ["--user", "--socket", first.socket, "--state-dir", first.directory.file("s3"), "--cache-dir", first.directory.file("c3"), "--config", first.directory.file("none.conf")],
                                     in: first.directory)
        defer { Task { await third.stop() } }
        try await TestDaemon.waitForSocket(first.socket, process: third)
        let client = try TestConnection(first.socket)
        #expect(try #require(try await client.roundTrip(Ping())).type == Pong.eventType)
    }

    @Test func refusesToReplaceAFileThatIsNotASocket() async throws {
        let dir = try TempDirectory()
        defer { dir.remove() }
        let path = try dir.write("not-a-socket", "precious data")
        let result = try await ChildProcess.run(BuiltProducts.path("earshotd"),
                                                ["--user", "--socket", path, "--state-dir", dir.file("s"), "--cache-dir", dir.file("c"), "--config", dir.file("none.conf")],
                                                in: dir)
        #expect(result.status == 1)
        #expect(result.stderr.contains("is not a socket"))
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "precious data")
    }
}
