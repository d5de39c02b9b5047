import EarshotWire
import Foundation
import Testing
import TestSupport

/// `earshotctl` and `earshot` as a user runs them.
@Suite struct CommandLineTests {
    @Test func earshotctlStatusAsTextAndJSON() async throws {
        let daemon = try await TestDaemon()
        defer { Task { await daemon.cleanUp() } }
        let text = try await ChildProcess.run(BuiltProducts.path("earshotctl"), ["--socket", daemon.socket, "status"], in: daemon.directory)
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains("earshotd \(EarshotVersion.string)"))
        #expect(text.stdout.contains("socket:       \(daemon.socket)"))
        let json = try await ChildProcess.run(BuiltProducts.path("earshotctl"), ["status", "--json"], environment: ["EARSHOT_SOCKET": daemon.socket], in: daemon.directory)
        #expect(json.status == 0, "\(json.stderr)")
        let status = try JSONDecoder().decode(DaemonStatus.self, from: Data(json.stdout.utf8))
        #expect(status.pid == daemon.child.pid)
        #expect(status.mode == "user")
        #expect(status.connections >= 1)
        #expect(status.limits.maxConnections == 256)
    }

    @Test func earshotctlConfigShowsEveryKeyWithItsSource() async throws {
        let daemon = try await TestDaemon(config: "[Limits]\nMaxConnections=42\nBogus=1\n")
        defer { Task { await daemon.cleanUp() } }
        let json = try await ChildProcess.run(BuiltProducts.path("earshotctl"), ["--socket", daemon.socket, "config", "--json"], in: daemon.directory)
        #expect(json.status == 0, "\(json.stderr)")
        let report = try JSONDecoder().decode(ConfigReport.self, from: Data(json.stdout.utf8))
        let entry = try #require(report.entries.first { $0.key == "Limits.MaxConnections" })
        #expect(entry.value == "42")
        #expect(entry.defaultValue == "256")
        #expect(entry.source.hasSuffix("earshotd.conf:2"))
        #expect(report.warnings.contains { $0.hasSuffix("earshotd.conf:3: unknown key Limits.Bogus") })
        let text = try await ChildProcess.run(BuiltProducts.path("earshotctl"), ["--socket", daemon.socket, "config"], in: daemon.directory)
        #expect(text.stdout.contains("Limits.MaxConnections"))
        #expect(text.stderr.contains("unknown key Limits.Bogus"))
    }

    @Test func earshotctlSaysClearlyWhenNoDaemonAnswers() async throws {
        let dir = try TempDirectory()
        defer { dir.remove() }
        let result = try await ChildProcess.run(BuiltProducts.path("earshotctl"), ["--socket", dir.file("nobody.sock"), "status"], in: dir)
        #expect(result.status == 1)
        #expect(result.stderr.contains("no Earshot daemon answers"))
        #expect(result.stderr.contains("nobody.sock"))
    }

    @Test func earshotctlRejectsUnknownCommandsAndOptions() async throws {
        let dir = try TempDirectory()
        defer { dir.remove() }
        let option = try await ChildProcess.run(BuiltProducts.path("earshotctl"), ["status", "--frobnicate"], in: dir)
        #expect(option.status == 64)
        #expect(option.stderr.contains("unknown option --frobnicate"))
        // Found before any daemon is contacted: none answers here.
        let command = try await ChildProcess.run(BuiltProducts.path("earshotctl"), ["--socket", dir.file("nobody.sock"), "explode"], in: dir)
        #expect(command.status == 64)
        #expect(command.stderr.contains("unknown command 'explode'") && !command.stderr.contains("no Earshot daemon answers"), "\(command.stderr)")
    }

    /// Issue 31 regression: `earshot` connected (starting a user daemon when none answered)
    /// before it looked at the command, and reported usage mistakes as daemon errors (exit 1).
    /// Now the whole command line is checked first: a usage error, exit 64, nothing started.
    @Test func usageMistakesAreFoundBeforeAnyDaemonIsContactedOrStarted() async throws {
        let dir = try TempDirectory()
        defer { dir.remove() }
        let env: [String: String?] = ["XDG_RUNTIME_DIR": dir.file("run"), "XDG_STATE_HOME": dir.file("state"), "XDG_CACHE_HOME": dir.file("cache"),
                                      "XDG_CONFIG_HOME": dir.file("config"), "EARSHOT_SOCKET": nil]
        try FileManager.default.createDirectory(atPath: dir.file("run"), withIntermediateDirectories: true)
        let socket = dir.file("run/earshot/earshot.sock")
        for (arguments, message) in [(["frobnicate"], "unknown command 'frobnicate'"), (["reserve"], "reserve needs one locale"),
                                     (["transcribe"], "transcribe needs audio files"), (["transcribe", "--beam", "x", "a.wav"], "--beam needs"),
                                     (["transcribe", "--module", "dictation", "--translate", "a.wav"], "dictation cannot translate"),
                                     (["locales", "--module", "nonsense"], "unknown module 'nonsense'"), (["install"], "--locale is required")] {
            let run = try await ChildProcess.run(BuiltProducts.path("earshot"), ["--socket", socket] + arguments, environment: env, in: dir)
            #expect(run.status == 64, "\(arguments): \(run.status) \(run.stderr)")
            #expect(run.stderr.contains(message) && run.stderr.contains("earshot --help"), "\(arguments): \(run.stderr)")
            #expect(!run.stderr.contains("starting earshotd"), "\(arguments) started a daemon")
        }
        #expect(!FileManager.default.fileExists(atPath: socket), "no user daemon was started")
        for (arguments, message) in [(["cancel"], "'cancel' needs an asset id"), (["release", "--locale", "en", "--uid", "me"], "--uid needs a number"),
                                     (["catalog", "frob"], "unknown catalog command 'frob'")] {
            let run = try await ChildProcess.run(BuiltProducts.path("earshotctl"), ["--socket", socket] + arguments, environment: env, in: dir)
            #expect(run.status == 64 && run.stderr.contains(message), "\(arguments): \(run.status) \(run.stderr)")
        }
        let daemon = try await ChildProcess.run(BuiltProducts.path("earshotd"), ["--user", "stray"], environment: env, in: dir)
        #expect(daemon.status == 64 && daemon.stderr.contains("unexpected argument stray"), "\(daemon.stderr)")
    }

    @Test func earshotStartsAUserDaemonOnDemand() async throws {
        let dir = try TempDirectory()
        defer { dir.remove() }
        let env: [String: String?] = ["XDG_RUNTIME_DIR": dir.file("run"), "XDG_STATE_HOME": dir.file("state"), "XDG_CACHE_HOME": dir.file("cache"),
                                      "XDG_CONFIG_HOME": dir.file("config"), "EARSHOT_SOCKET": nil]
        try FileManager.default.createDirectory(atPath: dir.file("run"), withIntermediateDirectories: true)
        // Skip the system socket: only the user daemon may answer here.
        let first = try await ChildProcess.run(BuiltProducts.path("earshot"), ["--socket", dir.file("run/earshot/earshot.sock"), "status", "--json"], environment: env, in: dir)
        // The daemon's own log says why it did not answer (once, in CI, it did not listen within 10 s).
        let log = (try? String(contentsOfFile: dir.file("state/earshot/earshotd.log"), encoding: .utf8)) ?? "(no log)"
        try #require(first.status == 0, "\(first.stderr)\nearshotd.log:\n\(log)")
        #expect(first.stderr.contains("starting earshotd --user"))
        let status = try JSONDecoder().decode(DaemonStatus.self, from: Data(first.stdout.utf8))
        defer { kill(status.pid, SIGTERM) }
        #expect(status.mode == "user")
        #expect(status.socketPath == dir.file("run/earshot/earshot.sock"))
        #expect(FileManager.default.fileExists(atPath: dir.file("state/earshot")))
        // The second call finds the running daemon and starts nothing.
        let second = try await ChildProcess.run(BuiltProducts.path("earshot"), ["--socket", dir.file("run/earshot/earshot.sock"), "status"], environment: env, in: dir)
        #expect(second.status == 0)
        #expect(!second.stderr.contains("starting"))
        #expect(second.stdout.contains("pid \(status.pid)"))
    }
}
