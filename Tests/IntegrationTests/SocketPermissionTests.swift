import EarshotSystem
import Foundation
import Testing
import TestSupport

/// Issue 8, defect 10 — `SocketMode` failed open: a mistyped value left the socket 0666 with only a
/// warning. The daemon now refuses to start; a valid mode is what the socket gets.
@Suite struct SocketModeFailsOpenTests {
    @Test func invalidSocketModeRefusesToStart() async throws {
        for bad in ["0668", "rw-rw----", "01777", ""] {
            let dir = try TempDirectory("esm")
            defer { dir.remove() }
            let config = try dir.write("earshotd.conf", "[Daemon]\nSocketMode=\(bad)\n")
            let socket = dir.file("run/earshot.sock")
            let daemon = try ChildProcess(BuiltProducts.path("earshotd"),
                                          ["--user", "--socket", socket, "--state-dir", dir.file("state"), "--cache-dir", dir.file("cache"), "--config", config],
                                          environment: ["NOTIFY_SOCKET": nil, "LISTEN_FDS": nil, "LISTEN_PID": nil, "JOURNAL_STREAM": nil], in: dir)
            let status = await daemon.wait(timeout: .seconds(15))
            await daemon.stop()
            #expect(status == 1, "SocketMode=\(bad): earshotd did not refuse to start")
            #expect(daemon.stderr.contains("Daemon.SocketMode=\(bad)") && daemon.stderr.contains("refusing to start"), "\(daemon.stderr)")
            #expect(!FileManager.default.fileExists(atPath: socket), "SocketMode=\(bad): the socket was created")
        }
    }

    @Test func socketIsCreatedWithTheConfiguredMode() async throws {
        for mode: mode_t in [0o600, 0o640, 0o666] {
            let daemon = try await TestDaemon(config: "[Daemon]\nSocketMode=0\(String(mode, radix: 8))\n")
            defer { Task { await daemon.cleanUp() } }
            var st = stat()
            #expect(lstat(daemon.socket, &st) == 0)
            #expect(st.st_mode & S_IFMT == S_IFSOCK)
            #expect(st.st_mode & 0o7777 == mode, "mode \(String(st.st_mode & 0o7777, radix: 8)), configured \(String(mode, radix: 8))")
        }
    }
}
