import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A real OCI registry (Debian's `docker-registry`, Distribution 2.8) on 127.0.0.1 for the fleet
/// tests: its own storage directory, optionally htpasswd basic auth (users made by Apache's
/// `htpasswd`), or a pull-through cache of another registry. Its access log (combined format, on
/// stdout) is parsed back so tests can count what it served.
public final class RegistryServer: @unchecked Sendable {
    public enum Mode: Sendable, Hashable {
        case plain
        /// htpasswd basic auth with one user.
        case basic(user: String, password: String)
        /// A pull-through cache of `upstream` (`http://127.0.0.1:PORT`).
        case proxy(upstream: String)
    }

    /// One access-log line.
    public struct Request: Sendable, Hashable {
        public var method: String
        public var path: String
        public var status: Int
        public var bytes: Int64
    }

    public struct StartError: Error, CustomStringConvertible {
        public var description: String
    }

    public let directory: TempDirectory
    public let port: UInt16
    public let mode: Mode
    private var process: ChildProcess

    /// `127.0.0.1:PORT`, the authority in `oci://` references.
    public var authority: String { "127.0.0.1:\(port)" }
    public var baseURL: String { "http://\(authority)" }

    private init(directory: TempDirectory, port: UInt16, mode: Mode, process: ChildProcess) {
        self.directory = directory
        self.port = port
        self.mode = mode
        self.process = process
    }

    deinit {
        if process.process.isRunning { process.signal(SIGKILL) }
        directory.remove()
    }

    /// Whether Debian's registry and htpasswd are installed (`Scripts/setup.sh` installs them).
    public static var isAvailable: Bool {
        FileManager.default.isExecutableFile(atPath: "/usr/bin/docker-registry") && FileManager.default.isExecutableFile(atPath: "/usr/bin/htpasswd")
    }

    /// Starts a registry on a free loopback port and returns once it answers `/v2/`.
    public static func start(_ mode: Mode = .plain) async throws -> RegistryServer {
        let directory = try TempDirectory("registry")
        do {
            if case .basic(let user, let password) = mode {
                let made = try await ChildProcess.run("/usr/bin/htpasswd", ["-Bbc", directory.file("htpasswd"), user, password], in: directory)
                guard made.status == 0 else { throw StartError(description: "htpasswd: \(made.stderr)") }
            }
            var lastError = "the registry did not start"
            for _ in 0..<8 {
                let port = try LoopbackPort.free()
                try configuration(directory: directory, port: port, mode: mode).write(toFile: directory.file("config.yml"), atomically: true, encoding: .utf8)
                let process = try ChildProcess("/usr/bin/docker-registry", ["serve", directory.file("config.yml")], in: directory, name: "registry")
                let server = RegistryServer(directory: directory, port: port, mode: mode, process: process)
                if await server.waitUntilServing() { return server }
                lastError = "registry on port \(port): \(process.stderr)"
                process.signal(SIGKILL)
                _ = await process.wait(timeout: .seconds(5))
                guard lastError.contains("address already in use") else { break }
            }
            throw StartError(description: lastError)
        } catch {
            directory.remove()
            throw error
        }
    }

    /// Kills the registry at once (connections in flight break), as a vanished site cache would.
    public func kill() async {
        process.signal(SIGKILL)
        _ = await process.wait(timeout: .seconds(5))
    }

    /// Requests served so far (from the access log).
    public func requests() -> [Request] {
        process.stdout.split(separator: "\n").compactMap(Self.parse)
    }

    /// `GET`s of blob `digest` answered with content (200 or 206).
    public func blobGets(_ digest: String) -> Int {
        requests().filter { $0.method == "GET" && $0.path.hasSuffix("/blobs/" + digest) && ($0.status == 200 || $0.status == 206) }.count
    }

    /// Whether blob `digest` is in the registry's own storage (for a cache: stored, not just passed on).
    public func stores(_ digest: String) -> Bool {
        let hex = digest.dropFirst("sha256:".count)
        return FileManager.default.fileExists(atPath: directory.file("data/docker/registry/v2/blobs/sha256/\(hex.prefix(2))/\(hex)/data"))
    }

    // `127.0.0.1 - - [date] "GET /v2/x/blobs/sha256:… HTTP/1.1" 200 9 "" "ua"`
    private static func parse(_ line: Substring) -> Request? {
        guard !line.hasPrefix("time="), let open = line.firstIndex(of: "\"") else { return nil }
        let afterOpen = line[line.index(after: open)...]
        guard let close = afterOpen.firstIndex(of: "\"") else { return nil }
        let request = afterOpen[..<close].split(separator: " ")
        let numbers = afterOpen[afterOpen.index(after: close)...].split(separator: " ")
        guard request.count >= 2, numbers.count >= 2, let status = Int(numbers[0]) else { return nil }
        return Request(method: String(request[0]), path: String(request[1]), status: status, bytes: Int64(numbers[1]) ?? 0)
    }

    private func waitUntilServing() async -> Bool {
        let deadline = ContinuousClock.now + .seconds(15)
        while ContinuousClock.now < deadline, process.process.isRunning {
            if process.stderr.contains("listening on") { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    private static func configuration(directory: TempDirectory, port: UInt16, mode: Mode) -> String {
        var text = """
            version: 0.1
            log:
              level: info
              accesslog:
                disabled: false
            storage:
              filesystem:
                rootdirectory: \(directory.file("data"))
              delete:
                enabled: true
            http:
              addr: 127.0.0.1:\(port)
              secret: earshot-test

            """
        switch mode {
        case .plain:
            break
        case .basic:
            text += """
                auth:
                  htpasswd:
                    realm: earshot-test
                    path: \(directory.file("htpasswd"))

                """
        case .proxy(let upstream):
            text += """
                proxy:
                  remoteurl: \(upstream)

                """
        }
        return text
    }
}
