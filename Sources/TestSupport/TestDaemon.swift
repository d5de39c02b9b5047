import EarshotSystem
import Foundation

/// The real `earshotd` binary on a temp socket, state and cache dir, with an optional config.
public final class TestDaemon: Sendable {
    public let directory: TempDirectory
    public let socket: String
    public let child: ChildProcess

    /// Starts the daemon (user mode, private dirs) and waits until its socket answers; `executable`
    /// defaults to the built `earshotd`.
    public init(config: String = "", arguments: [String] = [], environment: [String: String?] = [:], executable: String? = nil) async throws {
        directory = try TempDirectory("esd")
        socket = directory.file("run/earshot.sock")
        let configFile = try directory.write("earshotd.conf", config)
        var env = environment
        for key in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "JOURNAL_STREAM"] where env[key] == nil {
            env[key] = .some(nil)
        }
        child = try ChildProcess(executable ?? BuiltProducts.path("earshotd"),
                                 ["--user", "--socket", socket, "--state-dir", directory.file("state"), "--cache-dir", directory.file("cache"), "--config", configFile] + arguments,
                                 environment: env, in: directory)
        try await TestDaemon.waitForSocket(socket, process: child)
    }

    /// The frames each connection of process `pid` sent, by type, from the daemon's debug log
    /// (`LogLevel=debug`: "connection closed … received=TYPE:N,…"), once they have closed (waits up
    /// to 10 s for the first).
    public func framesReceived(fromPID pid: Int32) async throws -> [[String: Int]] {
        var closed: [Substring] = []
        for _ in 0..<200 {
            closed = child.stderr.split(separator: "\n").filter { $0.contains("connection closed") && $0.contains("peer_pid=\(pid) ") }
            if !closed.isEmpty { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        return closed.map { line in
            let received = line.split(separator: " ").first { $0.hasPrefix("received=") }?.dropFirst("received=".count) ?? ""
            return Dictionary(received.split(separator: ",").compactMap { pair -> (String, Int)? in
                let parts = pair.split(separator: ":")
                return parts.count == 2 ? (String(parts[0]), Int(parts[1]) ?? 0) : nil
            }, uniquingKeysWith: +)
        }
    }

    /// Waits until something accepts connections at `path`.
    public static func waitForSocket(_ path: String, process: ChildProcess? = nil, timeout: Duration = .seconds(20)) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let fd = try? UnixSocket.connect(path: path) {
                close(fd)
                return
            }
            if let process, !process.process.isRunning {
                throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "earshotd exited with \(process.process.terminationStatus): \(process.stderr)"])
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "nothing listens on \(path) after \(timeout)"])
    }

    /// Waits until the daemon has logged `text` (its stderr); throws after `timeout`.
    public func waitForLog(_ text: String, timeout: Duration = .seconds(10)) async throws {
        let deadline = ContinuousClock.now + timeout
        while !child.stderr.contains(text) {
            guard ContinuousClock.now < deadline else {
                throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "the daemon never logged \"\(text)\": \(child.stderr)"])
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// SIGTERM, then the exit status.
    public func terminate() async -> Int32? {
        child.signal(SIGTERM)
        return await child.wait()
    }

    /// Runs the built `earshotctl` against this daemon's socket with `arguments`.
    public func earshotctl(_ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await ChildProcess.run(BuiltProducts.path("earshotctl"), ["--socket", socket] + arguments, in: directory)
    }

    /// Kills the daemon if needed and removes its directory.
    public func cleanUp() async {
        await child.stop()
        directory.remove()
    }
}
