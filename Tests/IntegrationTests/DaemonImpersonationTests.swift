import Earshot
import EarshotSystem
import Foundation
import Testing
import TestSupport

/// Issue 8, defect 12 — the user daemon could be impersonated: another local user pre-creates the
/// fallback socket directory (or serves a socket clients find) and receives the user's audio.
/// The daemon refuses a hostile directory; clients check the directory and the daemon's uid.
@Suite struct UserDaemonImpersonationTests {
    /// Runs `earshotd --user` at its default socket, falling back to `<dir>/earshot-UID`.
    static func startUserDaemon(_ dir: TempDirectory) throws -> ChildProcess {
        let config = try dir.write("earshotd.conf", "")
        return try ChildProcess(BuiltProducts.path("earshotd"),
                                ["--user", "--state-dir", dir.file("state"), "--cache-dir", dir.file("cache"), "--config", config],
                                environment: ["XDG_RUNTIME_DIR": nil, "TMPDIR": dir.path, "EARSHOT_SOCKET": nil,
                                              "NOTIFY_SOCKET": nil, "LISTEN_FDS": nil, "LISTEN_PID": nil, "JOURNAL_STREAM": nil],
                                in: dir)
    }

    @Test func daemonRefusesAHostileFallbackDirectory() async throws {
        let cases: [(name: String, plant: (TempDirectory, String) -> Void, message: String)] = [
            ("owned by another uid", { _, path in mkdir(path, 0o700); chown(path, 65534, 65534) }, "is owned by uid 65534"),
            ("a symlink", { dir, path in mkdir(dir.file("elsewhere"), 0o700); symlink(dir.file("elsewhere"), path) }, "is a symbolic link"),
            ("mode 0777", { _, path in mkdir(path, 0o700); chmod(path, 0o777) }, "has mode 0777"),
        ]
        for hostile in cases {
            let dir = try TempDirectory("esi")
            defer { dir.remove() }
            let fallback = dir.file("earshot-\(getuid())")
            hostile.plant(dir, fallback)
            let daemon = try Self.startUserDaemon(dir)
            let status = await daemon.wait(timeout: .seconds(15))
            await daemon.stop()
            #expect(status == 1, "\(hostile.name): earshotd did not refuse")
            #expect(daemon.stderr.contains(fallback) && daemon.stderr.contains(hostile.message), "\(hostile.name): \(daemon.stderr)")
            #expect(!FileManager.default.fileExists(atPath: fallback + "/earshot/earshot.sock"), "\(hostile.name)")
        }
    }

    @Test func daemonCreatesAPrivateFallbackDirectory() async throws {
        let dir = try TempDirectory("esi")
        defer { dir.remove() }
        let daemon = try Self.startUserDaemon(dir)
        defer { Task { await daemon.stop() } }
        let socket = dir.file("earshot-\(getuid())/earshot/earshot.sock")
        try await TestDaemon.waitForSocket(socket, process: daemon)
        for path in [dir.file("earshot-\(getuid())"), dir.file("earshot-\(getuid())/earshot")] {
            var st = stat()
            #expect(lstat(path, &st) == 0 && st.st_mode & S_IFMT == S_IFDIR && st.st_mode & 0o7777 == 0o700 && st.st_uid == geteuid(), "\(path)")
        }
        let connection = try await DaemonConnection.connect(socket: socket, appID: "org.example.own")
        #expect(try await connection.status().pid == daemon.pid)
        await connection.close()
    }

    // A system daemon would answer first; CI has none, so there the test always runs.
    @Test(.enabled(if: EmbeddedModels.runs(!FileManager.default.fileExists(atPath: SocketLocations.system)), "a system daemon would answer first"))
    func clientRefusesAHostileFallbackDirectory() async throws {
        let dir = try TempDirectory("esi")
        defer { dir.remove() }
        let fallback = dir.file("earshot-\(getuid())")
        #expect(mkdir(fallback, 0o700) == 0)
        #expect(chown(fallback, OtherUser.nobody, OtherUser.nobody) == 0)
        await #expect {
            _ = try await DaemonConnection.connect(appID: "org.example.victim", environment: ["TMPDIR": dir.path])
        } throws: { error in
            guard case EarshotError.untrustedSocketDirectory(let path, let reason) = error else { return false }
            return path == fallback && reason.contains("owned by uid 65534")
        }
    }

    @Test func clientRefusesADaemonOwnedByAnotherUserBeforeSendingAnything() async throws {
        let dir = try TempDirectory("esi")
        defer { dir.remove() }
        let served = dir.file("nobody")
        #expect(mkdir(served, 0o755) == 0 && chown(served, OtherUser.nobody, OtherUser.nobody) == 0)
        OtherUser.openDirectories(dir.path)
        let socket = served + "/earshot.sock"
        let fake = try OtherUser.start(as: OtherUser.nobody, "/usr/bin/python3", ["-c", OtherUser.fakeDaemon, socket, "2"], in: dir, name: "fake")
        defer { Task { await fake.stop() } }
        _ = try await OtherUser.waitForLine(fake, "listening")

        // The library: a typed error naming the path and the uid.
        await #expect {
            _ = try await DaemonConnection.connect(socket: socket, appID: "org.example.victim")
        } throws: { error in
            guard case EarshotError.untrustedDaemon(let path, let uid) = error else { return false }
            return path == socket && uid == OtherUser.nobody
                && "\(error)" == "the process at \(socket) is owned by uid 65534, not the Earshot daemon"
        }
        // The CLI: the same message, exit 1, and no user daemon started in its place.
        let cli = try await ChildProcess.run(BuiltProducts.path("earshot"), ["--socket", socket, "status"], in: dir)
        #expect(cli.status == 1)
        #expect(cli.stderr.contains("the process at \(socket) is owned by uid 65534, not the Earshot daemon"), "\(cli.stderr)")
        #expect(!cli.stderr.contains("starting earshotd"), "\(cli.stderr)")

        // The fake daemon got nothing: no hello, no app id, no audio.
        _ = await fake.wait(timeout: .seconds(20))
        #expect(fake.stdout.split(separator: "\n").filter { $0.hasPrefix("received") } == ["received 0", "received 0"], "\(fake.stdout)")
    }
}
