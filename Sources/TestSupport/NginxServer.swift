import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A real nginx (Debian's `/usr/sbin/nginx`) on 127.0.0.1 for download tests: its own temp prefix
/// (config, logs, pid, temp paths), a document root the test fills, optional throttling
/// (`limit_rate`), TLS with a throwaway CA made by the `openssl` CLI, fixed-status routes, and an
/// access log the test can read back. Runs in the foreground (`daemon off`) with a master process,
/// so ``killWorkers()`` cuts every transfer in flight while the master respawns a worker.
public final class NginxServer: @unchecked Sendable {
    /// A location answering every request under `prefix` with `status` (and, for redirects, `target`).
    public struct Route: Sendable, Hashable {
        public var prefix: String
        public var status: Int
        public var target: String?

        public init(prefix: String, status: Int, target: String? = nil) {
            self.prefix = prefix
            self.status = status
            self.target = target
        }
    }

    public struct Options: Sendable, Hashable {
        /// nginx `limit_rate` per connection, e.g. `"1m"` (1 MiB/s).
        public var rateLimit: String?
        /// Serve HTTPS with a certificate for 127.0.0.1/localhost signed by a fresh test CA.
        public var tls: Bool
        public var routes: [Route]
        /// Further directives inside the `server` block, verbatim (e.g. a proxy in front of a registry).
        public var serverDirectives: String
        /// Further directives in the `http` block, verbatim (e.g. a `limit_req_zone`).
        public var httpDirectives: String

        public init(rateLimit: String? = nil, tls: Bool = false, routes: [Route] = [], serverDirectives: String = "", httpDirectives: String = "") {
            self.rateLimit = rateLimit
            self.tls = tls
            self.routes = routes
            self.serverDirectives = serverDirectives
            self.httpDirectives = httpDirectives
        }
    }

    /// One access-log line.
    public struct AccessLogEntry: Sendable, Hashable {
        /// The request line, e.g. `GET /files/a.bin HTTP/1.1`.
        public var request: String
        public var method: String
        public var path: String
        public var status: Int
        public var bodyBytesSent: Int64
        /// The `Range` request header, if sent.
        public var range: String?
        /// The `If-Range` request header, if sent.
        public var ifRange: String?
        public var userAgent: String?
    }

    public struct StartError: Error, CustomStringConvertible {
        public var description: String
    }

    /// The prefix directory (config, logs, certificates); removed when the server is released.
    public let directory: TempDirectory
    /// The document root: files written here are served at `/<relative path>`.
    public let root: String
    public let port: UInt16
    public let options: Options
    /// The test CA certificate (PEM) when ``Options/tls`` is on.
    public let caFile: String?
    private let master: ChildProcess

    /// `http://127.0.0.1:PORT` or `https://127.0.0.1:PORT`.
    public var baseURL: String { "\(options.tls ? "https" : "http")://127.0.0.1:\(port)" }

    /// The URL of `path` (with or without a leading slash).
    public func url(_ path: String) -> String { baseURL + (path.hasPrefix("/") ? path : "/" + path) }

    public var accessLogPath: String { directory.file("access.log") }
    public var errorLogPath: String { directory.file("error.log") }

    private init(directory: TempDirectory, root: String, port: UInt16, options: Options, caFile: String?, master: ChildProcess) {
        self.directory = directory
        self.root = root
        self.port = port
        self.options = options
        self.caFile = caFile
        self.master = master
    }

    deinit {
        if master.process.isRunning {
            // Fast shutdown: the master stops its workers (a SIGKILLed master would orphan them).
            let workers = workerPIDs()
            master.signal(SIGTERM)
            var waited = 0
            while master.process.isRunning, waited < 5000 {
                usleep(10_000)
                waited += 10
            }
            if master.process.isRunning {
                master.signal(SIGKILL)
                for pid in workers { kill(pid, SIGKILL) }
            }
        }
        directory.remove()
    }

    /// Starts nginx on a free loopback port and returns once it accepts connections.
    public static func start(_ options: Options = Options()) async throws -> NginxServer {
        let directory = try TempDirectory("nginx")
        do {
            let root = directory.file("root")
            for sub in ["root", "tmp"] {
                try FileManager.default.createDirectory(atPath: directory.file(sub), withIntermediateDirectories: true)
            }
            let caFile = options.tls ? try await makeCertificates(in: directory) : nil
            var lastError = "nginx did not start"
            for _ in 0..<8 {
                let port = try LoopbackPort.free()
                try configuration(directory: directory, root: root, port: port, options: options)
                    .write(toFile: directory.file("nginx.conf"), atomically: true, encoding: .utf8)
                try? FileManager.default.removeItem(atPath: directory.file("error.log"))
                let master = try ChildProcess("/usr/sbin/nginx",
                                              ["-p", directory.path + "/", "-c", directory.file("nginx.conf"), "-e", directory.file("error.log")],
                                              in: directory, name: "nginx")
                if await waitUntilListening(port: port, master: master) {
                    return NginxServer(directory: directory, root: root, port: port, options: options, caFile: caFile, master: master)
                }
                await master.stop()
                let log = (try? String(contentsOfFile: directory.file("error.log"), encoding: .utf8)) ?? ""
                lastError = "nginx failed on port \(port): \(log)\(master.stderr)"
                // Another process took the port between our probe and nginx's bind: try another.
                guard log.contains("Address already in use") else { break }
            }
            throw StartError(description: lastError)
        } catch {
            directory.remove()
            throw error
        }
    }

    // MARK: - Content

    /// Writes `bytes` at `path` under the root (creating directories), optionally with a given
    /// modification time (nginx's ETag is built from mtime and size), and returns its URL.
    @discardableResult
    public func put(_ path: String, _ bytes: [UInt8], modified: Date? = nil) throws -> String {
        let relative = path.hasPrefix("/") ? String(path.dropFirst()) : path
        let target = root + "/" + relative
        try FileManager.default.createDirectory(atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(bytes).write(to: URL(fileURLWithPath: target))
        if let modified {
            try FileManager.default.setAttributes([.modificationDate: modified], ofItemAtPath: target)
        }
        return url(relative)
    }

    /// `count` reproducible pseudo-random bytes (SplitMix64 from `seed`).
    public static func seededBytes(count: Int, seed: UInt64) -> [UInt8] {
        var state = seed
        var bytes = [UInt8](repeating: 0, count: count)
        bytes.withUnsafeMutableBytes { buffer in
            var index = 0
            while index < count {
                state &+= 0x9E37_79B9_7F4A_7C15
                var z = state
                z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
                z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
                z ^= z >> 31
                for shift in stride(from: 0, to: 64, by: 8) where index < count {
                    buffer[index] = UInt8(truncatingIfNeeded: z >> UInt64(shift))
                    index += 1
                }
            }
        }
        return bytes
    }

    // MARK: - Observation and faults

    /// The access log so far, oldest first.
    public func accessLog() -> [AccessLogEntry] {
        guard let text = try? String(contentsOfFile: accessLogPath, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap(Self.parse)
    }

    /// The access log once it has at least `count` entries (nginx logs a request when it ends), or
    /// whatever it has after `timeout`.
    public func accessLog(atLeast count: Int, timeout: Duration = .seconds(5)) async -> [AccessLogEntry] {
        let deadline = ContinuousClock.now + timeout
        while true {
            let entries = accessLog()
            if entries.count >= count || ContinuousClock.now >= deadline { return entries }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    /// The pids of the master's worker processes.
    public func workerPIDs() -> [pid_t] {
        let master = self.master.pid
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        return entries.compactMap { name -> pid_t? in
            guard let pid = pid_t(name),
                  let stat = try? String(contentsOfFile: "/proc/\(name)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return nil }
            // After "pid (comm)": state, ppid, …
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 1 && pid_t(fields[1]) == master ? pid : nil
        }
    }

    /// SIGKILLs every worker, cutting all transfers in flight (clients see the connection drop and
    /// the unfinished requests never reach the access log), and waits until the master has started
    /// a replacement, so the server keeps serving on the same port.
    public func killWorkers() async {
        let old = Set(workerPIDs())
        for pid in old { kill(pid, SIGKILL) }
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline {
            if !Set(workerPIDs()).subtracting(old).isEmpty { return }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Stops nginx (fast shutdown, then SIGKILL if it lingers). Logs stay readable until release.
    public func stop() async {
        guard master.process.isRunning else { return }
        master.signal(SIGTERM)
        if await master.wait(timeout: .seconds(5)) == nil {
            for pid in workerPIDs() { kill(pid, SIGKILL) }
            await master.stop()
        }
    }

    // MARK: - Setup

    private static let logFormat = #"$status\t$body_bytes_sent\t$http_range\t$http_if_range\t$http_user_agent\t$request"#

    private static func parse(_ line: Substring) -> AccessLogEntry? {
        let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
        guard fields.count == 6, let status = Int(fields[0]), let bytes = Int64(fields[1]) else { return nil }
        func value(_ field: String) -> String? { field == "-" ? nil : unescape(field) }
        let request = unescape(fields[5])
        let parts = request.split(separator: " ")
        return AccessLogEntry(request: request, method: parts.first.map(String.init) ?? "",
                              path: parts.count > 1 ? String(parts[1]) : "", status: status, bodyBytesSent: bytes,
                              range: value(fields[2]), ifRange: value(fields[3]), userAgent: value(fields[4]))
    }

    /// Undoes nginx's default log escaping (`"`, `\` and control bytes are written as `\xHH`).
    private static func unescape(_ field: String) -> String {
        guard field.contains("\\x") else { return field }
        var bytes: [UInt8] = []
        let utf8 = Array(field.utf8)
        var index = 0
        while index < utf8.count {
            if utf8[index] == UInt8(ascii: "\\"), index + 3 < utf8.count, utf8[index + 1] == UInt8(ascii: "x"),
               let byte = UInt8(String(decoding: utf8[(index + 2)...(index + 3)], as: UTF8.self), radix: 16) {
                bytes.append(byte)
                index += 4
            } else {
                bytes.append(utf8[index])
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func configuration(directory: TempDirectory, root: String, port: UInt16, options: Options) -> String {
        let prefix = directory.path
        var server = """
                listen 127.0.0.1:\(port)\(options.tls ? " ssl" : "");
                server_name localhost;
                root \(root);

        """
        if options.tls {
            server += """
                    ssl_certificate \(prefix)/server.pem;
                    ssl_certificate_key \(prefix)/server.key;

            """
        }
        if let rate = options.rateLimit {
            server += "        limit_rate \(rate);\n"
        }
        for route in options.routes {
            server += "        location ^~ \(route.prefix) { return \(route.status)\(route.target.map { " " + $0 } ?? ""); }\n"
        }
        server += options.serverDirectives
        return """
        daemon off;
        master_process on;
        worker_processes 1;
        \(geteuid() == 0 ? "user root;" : "")
        pid \(prefix)/nginx.pid;
        lock_file \(prefix)/nginx.lock;
        error_log \(prefix)/error.log info;
        events { worker_connections 256; }
        http {
            log_format earshot "\(logFormat)";
            access_log \(prefix)/access.log earshot;
            default_type application/octet-stream;
            sendfile on;
            keepalive_timeout 5s;
            server_tokens off;
            client_body_temp_path \(prefix)/tmp/body;
            proxy_temp_path \(prefix)/tmp/proxy;
            fastcgi_temp_path \(prefix)/tmp/fastcgi;
            uwsgi_temp_path \(prefix)/tmp/uwsgi;
            scgi_temp_path \(prefix)/tmp/scgi;
        \(options.httpDirectives)
            server {
        \(server)    }
        }

        """
    }

    /// Makes a throwaway CA and a server certificate for 127.0.0.1 and localhost; returns the CA file.
    private static func makeCertificates(in directory: TempDirectory) async throws -> String {
        let ca = directory.file("ca.pem")
        let extensions = try directory.write("server.ext", """
            basicConstraints = critical, CA:FALSE
            keyUsage = critical, digitalSignature, keyEncipherment
            extendedKeyUsage = serverAuth
            subjectAltName = IP:127.0.0.1, DNS:localhost

            """)
        let steps: [[String]] = [
            ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", directory.file("ca.key"), "-out", ca, "-days", "2", "-subj", "/CN=Earshot Test CA",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
            ["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", directory.file("server.key"), "-out", directory.file("server.csr"), "-subj", "/CN=localhost"],
            ["x509", "-req", "-in", directory.file("server.csr"), "-CA", ca, "-CAkey", directory.file("ca.key"),
             "-CAcreateserial", "-out", directory.file("server.pem"), "-days", "2", "-extfile", extensions],
        ]
        for arguments in steps {
            let result = try await ChildProcess.run("/usr/bin/openssl", arguments, in: directory, timeout: .seconds(30))
            guard result.status == 0 else {
                throw StartError(description: "openssl \(arguments[0]) failed: \(result.stderr)")
            }
        }
        return ca
    }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }

    /// Polls until something accepts on 127.0.0.1:`port`; false if nginx exits or 10 s pass.
    private static func waitUntilListening(port: UInt16, master: ChildProcess) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline, master.process.isRunning {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            if fd >= 0 {
                var address = loopback(port: port)
                let connected = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                    }
                }
                close(fd)
                if connected { return true }
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }
}
