import EarshotSystem
import Foundation

/// Starts a per-user daemon (`earshotd --user`) when none answers, the way `earshot` does.
public enum UserDaemon {
    /// Where the user daemon's output goes: `$XDG_STATE_HOME/earshot/earshotd.log`.
    public static func logPath(environment: [String: String]) -> String {
        let state = environment["XDG_STATE_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? ((environment["HOME"] ?? NSHomeDirectory()) + "/.local/state")
        return state + "/earshot/earshotd.log"
    }

    /// Launches `daemon` (`earshotd` beside the running executable by default) with `--user` in its
    /// own session, then waits up to `timeout` for its socket to answer.
    public static func start(daemon: String? = nil, socket: String? = nil, timeout: Duration = .seconds(10), environment: [String: String] = ProcessInfo.processInfo.environment) async throws -> String {
        let executable = daemon ?? siblingExecutable("earshotd")
        let log = logPath(environment: environment)
        try FileManager.default.createDirectory(atPath: (log as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        if !FileManager.default.fileExists(atPath: log) { _ = FileManager.default.createFile(atPath: log, contents: nil) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setsid")
        process.arguments = [executable, "--user"] + (socket.map { ["--socket", $0] } ?? [])
        process.standardInput = FileHandle.nullDevice
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        output.seekToEndOfFile()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let path = socket ?? SocketLocations.user(environment: environment)
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let fd = try? UnixSocket.connect(path: path) {
                close(fd)
                return path
            }
            if !process.isRunning, process.terminationStatus != 0 {
                throw EarshotError.noDaemon(tried: [(path, "earshotd --user exited with status \(process.terminationStatus); see \(log)")])
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw EarshotError.noDaemon(tried: [(path, "earshotd --user did not start listening within \(timeout); see \(log)")])
    }

    /// The `earshotd` to start: beside the running executable, else the first on `PATH`.
    static func locate(environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        let directories = [ProcessFacts.executableDirectory] + (environment["PATH"] ?? "").split(separator: ":").map(String.init)
        return directories.map { ($0 as NSString).appendingPathComponent("earshotd") }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// `name` in the directory of the running executable.
    static func siblingExecutable(_ name: String) -> String {
        (ProcessFacts.executableDirectory as NSString).appendingPathComponent(name)
    }
}
