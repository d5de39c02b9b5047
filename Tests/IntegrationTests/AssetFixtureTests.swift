import EarshotSystem
import EarshotWire
import Foundation
import Testing
import TestSupport

// The fixture shared by the Asset*Tests suites: a minisign key pair, tar.gz assets of seeded random
// bytes, a signed format-1 catalog served by a real nginx on loopback, and the real earshotd pointed
// at it (state and cache dirs owned by the fixture, so a daemon can be killed and restarted on them).

/// One asset the fixture packs, serves and lists in the catalog.
struct AssetSpec: Sendable {
    var id: String
    var version: Int = 1
    var kind: AssetKind = .transcriber
    var locales: [String]
    /// Role → (relative path, content).
    var files: [String: (path: String, bytes: [UInt8])]
    /// Overrides the catalog's `installed_size` (default: the content bytes plus 64 KiB).
    var installedSize: Int64?
    /// Extra members packed into the archive but not named by any role.
    var extraMembers: [(path: String, bytes: [UInt8])] = []

    /// A transcriber asset: `model.bin` of `bytes` seeded random bytes and a small `extra/tokens.txt`.
    static func random(_ id: String, version: Int = 1, locales: [String], bytes: Int, seed: UInt64) -> AssetSpec {
        AssetSpec(id: id, version: version, locales: locales, files: [
            "model": ("model.bin", NginxServer.seededBytes(count: bytes, seed: seed)),
            "tokens": ("extra/tokens.txt", Array("tokens of \(id) version \(version)\n".utf8)),
        ])
    }
}

/// An asset packed and put on the server.
struct BuiltAsset: Sendable {
    var spec: AssetSpec
    /// Server path, e.g. `/assets/asr-en-1.tar.gz`.
    var serverPath: String
    var url: String
    var size: Int64
    var sha256: String
    var installedSize: Int64
    var key: String { "\(spec.id)@\(spec.version)" }
    var contentBytes: Int64 { spec.files.values.reduce(0) { $0 + Int64($1.bytes.count) } + spec.extraMembers.reduce(0) { $0 + Int64($1.bytes.count) } }
}

/// Minisign key, assets, signed catalog on nginx, and earshotd processes on shared state/cache dirs.
final class AssetFixture: @unchecked Sendable {
    let directory: TempDirectory
    let server: NginxServer
    let key: MinisignTool.KeyPair
    let minisign: MinisignTool
    /// Holds only the public key (the daemon's `KeysDirectory`).
    let keysDirectory: String
    var stateDirectory: String
    var cacheDirectory: String
    private let lock = NSLock()
    private var daemons: [TestDaemon] = []
    private var cleanups: [@Sendable () -> Void] = []

    private init(directory: TempDirectory, server: NginxServer, key: MinisignTool.KeyPair, minisign: MinisignTool, keysDirectory: String) {
        self.directory = directory
        self.server = server
        self.key = key
        self.minisign = minisign
        self.keysDirectory = keysDirectory
        stateDirectory = directory.file("state")
        cacheDirectory = directory.file("cache")
    }

    /// Runs `body` with a fresh fixture and always cleans up (daemons killed, nginx stopped, dirs removed).
    static func with<T: Sendable>(rateLimit: String? = nil, _ body: (AssetFixture) async throws -> T) async throws -> T {
        let directory = try TempDirectory("af")
        let server: NginxServer
        do {
            server = try await NginxServer.start(NginxServer.Options(rateLimit: rateLimit))
        } catch {
            directory.remove()
            throw error
        }
        let fixture: AssetFixture
        do {
            let minisign = try MinisignTool()
            let key = try await minisign.generateKey(named: "catalog", in: directory)
            let keys = directory.file("keys")
            try FileManager.default.createDirectory(atPath: keys, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: key.publicKeyPath, toPath: keys + "/catalog.pub")
            fixture = AssetFixture(directory: directory, server: server, key: key, minisign: minisign, keysDirectory: keys)
        } catch {
            await server.stop()
            directory.remove()
            throw error
        }
        do {
            let result = try await body(fixture)
            await fixture.cleanUp()
            return result
        } catch {
            await fixture.cleanUp()
            throw error
        }
    }

    /// Registers something to undo at cleanup (after the daemons are gone), e.g. unmounting.
    func onCleanUp(_ action: @escaping @Sendable () -> Void) {
        lock.withLock { cleanups.append(action) }
    }

    private func cleanUp() async {
        for daemon in lock.withLock({ daemons }) { await daemon.cleanUp() }
        for action in lock.withLock({ cleanups }).reversed() { action() }
        await server.stop()
        directory.remove()
    }

    // MARK: Assets and catalog

    /// Packs `spec` into a tar.gz (real `tar`, fast gzip), puts it on the server and hashes it.
    func build(_ spec: AssetSpec) async throws -> BuiltAsset {
        let name = "\(spec.id)-\(spec.version)"
        let source = directory.file("src/\(name)")
        var members: [String] = []
        for (path, bytes) in spec.files.values.map({ ($0.path, $0.bytes) }) + spec.extraMembers.map({ ($0.path, $0.bytes) }) {
            let target = source + "/" + path
            try FileManager.default.createDirectory(atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data(bytes).write(to: URL(fileURLWithPath: target))
            members.append(path)
        }
        let archive = directory.file("archives/\(name).tar.gz")
        try FileManager.default.createDirectory(atPath: directory.file("archives"), withIntermediateDirectories: true)
        let tar = try await ChildProcess.run("/usr/bin/tar", ["-I", "gzip -1", "-cf", archive, "-C", source] + members.sorted(), in: directory)
        guard tar.status == 0 else { throw FixtureError("tar failed: \(tar.stderr)") }
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: archive)))
        let serverPath = "/assets/\(name).tar.gz"
        let url = try server.put(serverPath, bytes)
        var built = BuiltAsset(spec: spec, serverPath: serverPath, url: url, size: Int64(bytes.count),
                               sha256: try await sha256(archive), installedSize: 0)
        built.installedSize = spec.installedSize ?? built.contentBytes + 65536
        return built
    }

    func sha256(_ path: String) async throws -> String {
        let run = try await ChildProcess.run("/usr/bin/sha256sum", [path], in: directory)
        guard run.status == 0, let digest = run.stdout.split(separator: " ").first else { throw FixtureError("sha256sum failed: \(run.stderr)") }
        return String(digest)
    }

    /// Writes a format-1 catalog of `assets` with `version`, signs it with real minisign and puts
    /// both on the server (`/catalog.json`, `/catalog.json.minisig`) with the given modification
    /// time (nginx's ETag comes from mtime and size, so successive catalogs get distinct times).
    /// The engine is a neutral `test-engine`: the assets are random bytes no engine loads, and an
    /// engine that needs a voice activity detector would make them unsupported without one.
    func publishCatalog(version: Int64, assets: [BuiltAsset], modified: Date = Date()) async throws {
        let document = CatalogDocument(version: version, assets: assets.map { asset in
            CatalogDocument.Entry(id: asset.spec.id, version: asset.spec.version, kind: asset.spec.kind.rawValue, engine: "test-engine",
                                  locales: asset.spec.locales, size: asset.size, installedSize: asset.installedSize, sha256: asset.sha256,
                                  urls: [asset.url], files: asset.spec.files.mapValues(\.path))
        })
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        let file = directory.file("catalog-\(version).json")
        try encoder.encode(document).write(to: URL(fileURLWithPath: file))
        try await minisign.sign(file, with: key, in: directory)
        try server.put("/catalog.json", Array(try Data(contentsOf: URL(fileURLWithPath: file))), modified: modified)
        try server.put("/catalog.json.minisig", Array(try Data(contentsOf: URL(fileURLWithPath: file + ".minisig"))), modified: modified)
    }

    /// The access-log entries for `asset`'s file once there are at least `count` (nginx logs a
    /// request when it ends), or whatever there is after `timeout`.
    func requests(for asset: BuiltAsset, atLeast count: Int = 1, timeout: Duration = .seconds(10)) async -> [NginxServer.AccessLogEntry] {
        let deadline = ContinuousClock.now + timeout
        while true {
            let entries = server.accessLog().filter { $0.path == asset.serverPath }
            if entries.count >= count || ContinuousClock.now >= deadline { return entries }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    // MARK: Daemons

    /// The daemon config: the fixture's catalog and key, then `extra` (e.g. `[Assets]` keys).
    func config(_ extra: String) -> String {
        """
        [Catalog]
        URL=\(server.url("/catalog.json"))
        KeysDirectory=\(keysDirectory)
        [Download]
        ConnectTimeoutSec=5
        \(extra)

        """
    }

    /// Starts earshotd on the fixture's state and cache dirs (a fresh socket each time).
    func startDaemon(_ extra: String = "", environment: [String: String?] = [:]) async throws -> TestDaemon {
        let daemon = try await TestDaemon(config: config(extra),
                                          arguments: ["--state-dir", stateDirectory, "--cache-dir", cacheDirectory],
                                          environment: environment)
        lock.withLock { daemons.append(daemon) }
        return daemon
    }

    /// Starts earshotd and has an admin (root) connection load the catalog.
    func startDaemonWithCatalog(_ extra: String = "", environment: [String: String?] = [:]) async throws -> TestDaemon {
        let daemon = try await startDaemon(extra, environment: environment)
        let admin = try TestConnection(daemon.socket)
        defer { admin.close() }
        let reply = try await admin.call(CatalogRequest(id: "catalog", refresh: true)).decode(CatalogReply.self)
        guard reply.sources.allSatisfy({ $0.outcome != "failed" }), !reply.assets.isEmpty else {
            throw FixtureError("catalog refresh failed: \(reply.sources)")
        }
        return daemon
    }

    /// SIGKILLs `daemon` and waits for it to die.
    func kill(_ daemon: TestDaemon) async {
        daemon.child.signal(SIGKILL)
        _ = await daemon.child.wait(timeout: .seconds(10))
    }

    /// Makes the daemon's socket reachable for other uids (its dirs are 0700 by default).
    func openSocketDirectories(_ daemon: TestDaemon) {
        for dir in [daemon.directory.path, (daemon.socket as NSString).deletingLastPathComponent] {
            chmod(dir, 0o755)
        }
    }

    // MARK: The store on disk

    var stagingEntries: [String] { (try? FileManager.default.contentsOfDirectory(atPath: stateDirectory + "/staging")) ?? [] }
    var downloadEntries: [String] { (try? FileManager.default.contentsOfDirectory(atPath: cacheDirectory + "/downloads")) ?? [] }

    /// Version directories under `state/assets/<id>`.
    func installedVersionDirectories(_ id: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: stateDirectory + "/assets/" + id)) ?? []).sorted()
    }

    /// Problems with the installed copy of `asset` at `path` (empty: every file present with its bytes).
    func contentProblems(_ asset: BuiltAsset, at path: String) -> [String] {
        var problems: [String] = []
        for (role, file) in asset.spec.files {
            guard let data = FileManager.default.contents(atPath: path + "/" + file.path) else {
                problems.append("\(role) file \(file.path) is missing")
                continue
            }
            if Array(data) != file.bytes { problems.append("\(role) file \(file.path) differs (\(data.count) bytes, want \(file.bytes.count))") }
        }
        return problems
    }

    // MARK: A non-admin peer

    /// Runs the requests as uid/gid 65534 (nobody) through a stdlib-only Python Wyoming-framing
    /// client under `setpriv`: hello with `appID`, then each request in turn; returns each reply
    /// (the frame whose `id` matches and that is not a progress event).
    func runAsNobody(_ daemon: TestDaemon, appID: String, _ requests: [Frame]) async throws -> (welcome: Welcome, replies: [Frame]) {
        openSocketDirectories(daemon)
        let encoded = requests.map { PythonRequest(type: $0.type, data: $0.data) }
        let json = String(decoding: try JSONEncoder().encode(encoded), as: UTF8.self)
        let run = try await ChildProcess.run("/usr/bin/setpriv",
                                             ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", Self.pythonClient, daemon.socket, appID, json],
                                             in: directory, timeout: .seconds(60))
        guard run.status == 0 else { throw FixtureError("python client (uid 65534) exited \(run.status): \(run.stderr)") }
        let lines = run.stdout.split(separator: "\n")
        let frames = try lines.map { line in
            let decoded = try JSONDecoder().decode(PythonRequest.self, from: Data(line.utf8))
            return Frame(type: decoded.type, data: decoded.data)
        }
        guard let first = frames.first, first.type == Welcome.eventType else { throw FixtureError("no welcome: \(run.stdout)") }
        guard frames.count == requests.count + 1 else { throw FixtureError("python client got \(frames.count - 1) replies for \(requests.count) requests") }
        return (try first.decode(Welcome.self), Array(frames.dropFirst()))
    }

    private struct PythonRequest: Codable {
        var type: String
        var data: [String: JSONValue]
    }

    /// argv: socket, app id, JSON array of {type, data}. Prints one JSON line {type, data} for the
    /// welcome and for each reply.
    static let pythonClient = #"""
        import json, socket, sys
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(sys.argv[1])
        stream = sock.makefile("rwb")

        def send(kind, data):
            body = json.dumps(data).encode()
            header = json.dumps({"type": kind, "version": "1.7.0", "data_length": len(body)}).encode()
            stream.write(header + b"\n" + body)
            stream.flush()

        def receive():
            line = stream.readline()
            if not line:
                raise SystemExit("connection closed by the daemon")
            header = json.loads(line)
            data = dict(header.get("data") or {})
            length = header.get("data_length") or 0
            if length:
                data.update(json.loads(stream.read(length)))
            payload = header.get("payload_length") or 0
            if payload:
                stream.read(payload)
            return header["type"], data

        def reply_to(request_id):
            while True:
                kind, data = receive()
                if data.get("id") == request_id and not kind.endswith(".progress"):
                    print(json.dumps({"type": kind, "data": data}), flush=True)
                    return

        send("earshot.hello", {"id": "hello", "protocol_version": 1, "app_id": sys.argv[2]})
        reply_to("hello")
        for index, request in enumerate(json.loads(sys.argv[3])):
            data = dict(request["data"])
            data["id"] = data.get("id") or "py-%d" % index
            send(request["type"], data)
            reply_to(data["id"])
        """#
}

struct FixtureError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The catalog document (Docs/CATALOG.md, format 1).
struct CatalogDocument: Encodable {
    var format = 1
    var version: Int64
    var generated = "2025-06-01T12:00:00Z"
    var assets: [Entry]

    struct Entry: Encodable {
        var id: String
        var version: Int
        var kind: String
        var engine: String
        var locales: [String]
        var capabilities = Capabilities()
        var size: Int64
        var installedSize: Int64
        var sha256: String
        var urls: [String]
        var format = "tar.gz"
        var files: [String: String]
        var license = "MIT"

        enum CodingKeys: String, CodingKey {
            case id, version, kind, engine, locales, capabilities, size, installedSize = "installed_size", sha256, urls, format, files, license
        }
    }

    struct Capabilities: Encodable {
        var streaming = false
        var volatileResults = true
        var timeRanges = true
        var alternatives = false
        var confidence = true
        var contentHints: [String] = []
        enum CodingKeys: String, CodingKey {
            case streaming, volatileResults = "volatile_results", timeRanges = "time_ranges", alternatives, confidence, contentHints = "content_hints"
        }
    }
}

extension TestConnection {
    /// Sends `earshot.hello` with `appID` and returns the welcome.
    @discardableResult
    func hello(_ appID: String) async throws -> Welcome {
        try await call(Hello(id: "hello", appId: appID)).decode(Welcome.self)
    }

    /// Sends `event` (which must carry an `id`) and returns its reply (`.result`, `welcome` or
    /// `error`) with the progress events for it that came first.
    func exchange<E: WireEvent>(_ event: E, timeout: Duration = .seconds(30)) async throws -> (progress: [InstallProgress], reply: Frame) {
        let frame = try Frame(event)
        guard let id = frame.data["id"]?.stringValue else { throw FixtureError("request \(E.eventType) has no id") }
        try await channel.send(frame)
        var progress: [InstallProgress] = []
        let deadline = ContinuousClock.now + timeout
        while true {
            let left = deadline - ContinuousClock.now
            guard left > .zero, let next = try await self.next(timeout: left) else {
                throw FixtureError("no reply to \(E.eventType) \(id) (connection closed or timed out)")
            }
            guard next.data["id"]?.stringValue == id else { continue }
            if next.type == InstallProgress.eventType {
                progress.append(try next.decode(InstallProgress.self))
            } else {
                return (progress, next)
            }
        }
    }

    /// Sends `event` and returns its reply, skipping progress events.
    func call<E: WireEvent>(_ event: E, timeout: Duration = .seconds(30)) async throws -> Frame {
        try await exchange(event, timeout: timeout).reply
    }
}

extension Frame {
    /// The error code when this is an `error` event.
    var errorCode: ErrorCode? {
        guard type == ErrorEvent.eventType else { return nil }
        return (try? decode(ErrorEvent.self))?.code ?? .internalError
    }

    /// The error text when this is an `error` event.
    var errorText: String? {
        guard type == ErrorEvent.eventType else { return nil }
        return (try? decode(ErrorEvent.self))?.text
    }
}

/// Module configurations the tests ask for.
enum Modules {
    static func transcriber(_ locale: String) -> ModuleConfiguration { ModuleConfiguration(kind: .transcriber, locale: locale) }
}

/// The fixture itself: a catalog signed with real minisign on real nginx is loaded by earshotd.
@Suite struct AssetFixtureTests {
    @Test func signedCatalogFromNginxIsLoadedAndBadOnesAreRejectedOverTheWire() async throws {
        try await AssetFixture.with { fixture in
            let en = try await fixture.build(.random("asr-en", locales: ["en-US"], bytes: 64 << 10, seed: 1))
            try await fixture.publishCatalog(version: 3, assets: [en], modified: Date(timeIntervalSinceNow: -7200))
            let daemon = try await fixture.startDaemon()
            let admin = try TestConnection(daemon.socket)
            defer { admin.close() }
            // A source with nothing stored is fetched at start, without being asked.
            var loaded = try await admin.call(CatalogRequest(id: "c0")).decode(CatalogReply.self)
            for attempt in 0..<200 where loaded.assets.isEmpty {
                try await Task.sleep(for: .milliseconds(25))
                loaded = try await admin.call(CatalogRequest(id: "c\(attempt + 1)")).decode(CatalogReply.self)
            }
            #expect(loaded.sources.first?.version == 3)
            #expect(loaded.assets.map(\.id) == ["asr-en"])
            #expect(loaded.assets.first?.installed == false)
            #expect(loaded.sources.first?.keyId?.count == 16)

            // A refresh is a conditional GET: nginx answers 304.
            let before = fixture.server.accessLog().count
            let second = try await admin.call(CatalogRequest(id: "r1", refresh: true)).decode(CatalogReply.self)
            #expect(second.sources.map(\.outcome) == ["unchanged"])
            let conditional = await fixture.server.accessLog(atLeast: before + 1).dropFirst(before)
            #expect(conditional.map { "\($0.path) \($0.status)" } == ["/catalog.json 304"])

            // A tampered catalog (valid signature of other bytes) is rejected and the current one kept.
            let original = try String(contentsOfFile: fixture.server.root + "/catalog.json", encoding: .utf8)
            try fixture.server.put("/catalog.json", Array((original + " ").utf8),
                                   modified: Date(timeIntervalSinceNow: -3600))
            let tampered = try await admin.call(CatalogRequest(id: "r2", refresh: true)).decode(CatalogReply.self)
            #expect(tampered.sources.map(\.outcome) == ["failed"])
            #expect(tampered.sources.first?.version == 3)
            #expect(tampered.assets.map(\.id) == ["asr-en"])

            // So is an older catalog, correctly signed (rollback).
            try await fixture.publishCatalog(version: 2, assets: [], modified: Date(timeIntervalSinceNow: -1800))
            let rollback = try await admin.call(CatalogRequest(id: "r3", refresh: true)).decode(CatalogReply.self)
            #expect(rollback.sources.map(\.outcome) == ["failed"])
            #expect(rollback.sources.first?.message?.contains("older") == true, "\(rollback.sources)")
            #expect(rollback.assets.map(\.id) == ["asr-en"])
        }
    }
}
