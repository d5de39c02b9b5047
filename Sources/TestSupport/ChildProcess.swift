import Foundation

/// A process the tests run (the real binaries, Python, systemd tools) with output captured to files.
public final class ChildProcess: @unchecked Sendable {
    public let process = Process()
    public let stdoutPath: String
    public let stderrPath: String

    /// Starts `executable` with `arguments`; `environment` entries are added to (or, with a nil
    /// value, removed from) the test's own environment.
    public init(_ executable: String, _ arguments: [String], environment: [String: String?] = [:], in directory: TempDirectory, name: String? = nil, stdin: FileHandle? = nil) throws {
        let label = name ?? (executable as NSString).lastPathComponent
        stdoutPath = directory.file("\(label).\(UUID().uuidString.prefix(8)).out")
        stderrPath = directory.file("\(label).\(UUID().uuidString.prefix(8)).err")
        _ = FileManager.default.createFile(atPath: stdoutPath, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = env
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: stdoutPath))
        let errors = try FileHandle(forWritingTo: URL(fileURLWithPath: stderrPath))
        // The child has its own copies once it runs: the test process kept two descriptors open
        // per child for good (hundreds over a suite run, seen in a hung CI run's /proc/PID/fd).
        defer {
            try? output.close()
            try? errors.close()
        }
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = stdin ?? FileHandle.nullDevice
        try process.run()
    }

    public var pid: Int32 { process.processIdentifier }
    public var stdout: String { (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? "" }
    public var stderr: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

    /// Sends `signal` to the process.
    public func signal(_ number: Int32) {
        kill(process.processIdentifier, number)
    }

    /// Waits up to `timeout` for the process to exit; returns its status, or nil if it still runs.
    public func wait(timeout: Duration = .seconds(20)) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            if ContinuousClock.now >= deadline { return nil }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return process.terminationStatus
    }

    /// Kills the process if it still runs (test cleanup).
    public func stop() async {
        guard process.isRunning else { return }
        signal(SIGKILL)
        _ = await wait(timeout: .seconds(5))
    }

    /// Runs a command to completion and returns (status, stdout, stderr).
    public static func run(_ executable: String, _ arguments: [String], environment: [String: String?] = [:], in directory: TempDirectory, timeout: Duration = .seconds(60)) async throws -> (status: Int32, stdout: String, stderr: String) {
        let child = try ChildProcess(executable, arguments, environment: environment, in: directory)
        guard let status = await child.wait(timeout: timeout) else {
            await child.stop()
            throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "\(executable) did not finish within \(timeout)"])
        }
        return (status, child.stdout, child.stderr)
    }
}
