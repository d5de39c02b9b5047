import EarshotAssets
import EarshotSystem
import EarshotWire
import Foundation
import Testing
import TestSupport

/// Log entries as the service wrote them.
final class AssetLogRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private var entries: [AssetLogEntry] = []

    func record(_ entry: AssetLogEntry) { lock.withLock { entries.append(entry) } }
    var all: [AssetLogEntry] { lock.withLock { entries } }
    var warnings: [AssetLogEntry] { all.filter { $0.priority == .warning } }
}

/// Install progress as one waiter saw it (the sink runs on the job's thread).
final class ProgressLog: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [InstallProgress] = []

    func record(_ event: InstallProgress) { lock.withLock { events.append(event) } }
    var all: [InstallProgress] { lock.withLock { events } }
    var phases: [InstallPhase] { all.map(\.phase) }
    var maxBytesDone: Int64 { all.map(\.bytesDone).max() ?? 0 }
}

/// Everything an `AssetService` test needs, all real: a minisign key pair (made by `minisign`),
/// small asset archives (`tar`, Python's tarfile for hostile ones), a catalog JSON signed with
/// `minisign` and served from a `file://` URL, the state and cache dirs, and an injected clock.
final class InventoryFixture: Sendable {
    let directory: TempDirectory
    let tool: MinisignTool
    let keys: MinisignTool.KeyPair
    /// The service's clock: GC intervals, backoff, grace periods and expiry without waiting.
    let clock = ManualClock()
    /// What the services made by ``makeService(_:clock:)`` logged.
    let logs = AssetLogRecorder()

    var keysDirectory: String { directory.file("keys") }
    var stateDirectory: String { directory.file("state") }
    var cacheDirectory: String { directory.file("cache") }
    var assetsDirectory: String { stateDirectory + "/assets" }
    var stagingDirectory: String { stateDirectory + "/staging" }
    var downloadsDirectory: String { cacheDirectory + "/downloads" }
    var catalogPath: String { directory.file("catalog/catalog.json") }
    var catalogURL: String { "file://" + catalogPath }

    private init(directory: TempDirectory, tool: MinisignTool, keys: MinisignTool.KeyPair) {
        self.directory = directory
        self.tool = tool
        self.keys = keys
    }

    /// A fresh directory with a key pair whose public half is the only trusted key.
    static func make() async throws -> InventoryFixture {
        let directory = try TempDirectory("inv")
        let tool = try MinisignTool()
        let keys = try await tool.generateKey(named: "catalog", in: directory)
        for sub in ["keys", "catalog", "src"] {
            try FileManager.default.createDirectory(atPath: directory.file(sub), withIntermediateDirectories: true)
        }
        try FileManager.default.copyItem(atPath: keys.publicKeyPath, toPath: directory.file("keys/catalog.pub"))
        return InventoryFixture(directory: directory, tool: tool, keys: keys)
    }

    // MARK: Assets

    /// Packs `files` (relative path → contents) with `tar -czf`; returns the archive's path.
    func tarGz(_ name: String, _ files: [String: [UInt8]]) async throws -> String {
        let source = directory.file("src/\(name).d")
        for (path, bytes) in files {
            let target = source + "/" + path
            try FileManager.default.createDirectory(atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data(bytes).write(to: URL(fileURLWithPath: target))
        }
        let archive = directory.file("src/\(name).tar.gz")
        let result = try await ChildProcess.run("/usr/bin/tar", ["-czf", archive, "-C", source] + files.keys.sorted(), in: directory)
        guard result.status == 0 else { throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "tar: \(result.stderr)"]) }
        return archive
    }

    /// A single-file download with `bytes`.
    func plainFile(_ name: String, _ bytes: [UInt8]) throws -> String {
        let path = directory.file("src/\(name)")
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// A catalog entry for the download at `path` (its real size and SHA-256 unless `sha256` is
    /// given), served from the mirrors `urls` (default: `file://path`).
    func asset(_ id: String, version: Int = 1, kind: AssetKind = .transcriber, locales: [String], path: String,
               format: ArchiveFormat = .tarGz, files: [String: String], capabilities: AssetCapabilities = AssetCapabilities(),
               urls: [String]? = nil, sha256: String? = nil) throws -> CatalogAsset {
        let size = Int64(try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int))
        return CatalogAsset(id: id, version: version, kind: kind, engine: "test-engine", locales: locales, capabilities: capabilities,
                            size: size, installedSize: max(size, 1) * 4 + (1 << 20), sha256: try sha256 ?? FileDigest.sha256(path: path),
                            urls: urls ?? ["file://" + path], format: format, files: files, license: "MIT")
    }

    /// Writes the catalog (`format` 1) to ``catalogPath`` and signs it with the real `minisign`.
    func publish(version: Int64, _ assets: [CatalogAsset]) async throws {
        let catalog = Catalog(version: version, generated: "2025-06-01T12:00:00Z", assets: assets)
        try Catalog.makeEncoder().encode(catalog).write(to: URL(fileURLWithPath: catalogPath))
        try await tool.sign(catalogPath, with: keys, in: directory)
    }

    /// The catalog most tests use (catalog `version`, every asset at version 1, 100 000 data
    /// bytes per archive asset):
    /// - `tx-en`: transcriber for `en-US` and `en-GB` (time ranges), `tar.gz` with encoder + tokens;
    /// - `tx-en-live`: streaming transcriber for `en_US` (spelled with an underscore);
    /// - `tx-de`: transcriber for `de-DE` suited only to the `farField` content hint;
    /// - `dict-fr`: dictation for the language-only `fr`;
    /// - `vad`: language-independent detector, a single `file` of 50 000 bytes.
    @discardableResult
    func publishStandardCatalog(version: Int64 = 1) async throws -> [CatalogAsset] {
        let assets = try await standardAssets()
        try await publish(version: version, assets)
        return assets
    }

    func standardAssets() async throws -> [CatalogAsset] {
        [
            try asset("tx-en", locales: ["en-US", "en-GB"], path: try await tarGz("tx-en", StandardFiles.txEn),
                      files: ["encoder": "encoder.onnx", "tokens": "tokens.txt"], capabilities: AssetCapabilities(timeRanges: true)),
            try asset("tx-en-live", locales: ["en_US"], path: try await tarGz("tx-en-live", ["model.onnx": StandardFiles.bytes(100_000, seed: 2)]),
                      files: ["model": "model.onnx"], capabilities: AssetCapabilities(streaming: true, volatileResults: true)),
            try asset("tx-de", locales: ["de-DE"], path: try await tarGz("tx-de", ["model.onnx": StandardFiles.bytes(100_000, seed: 3)]),
                      files: ["model": "model.onnx"], capabilities: AssetCapabilities(contentHints: ["farField"])),
            try asset("dict-fr", kind: .dictation, locales: ["fr"], path: try await tarGz("dict-fr", ["model/acoustic.bin": StandardFiles.bytes(60_000, seed: 4), "model/fr.dict": StandardFiles.bytes(40_000, seed: 5)]),
                      files: ["model": "model/acoustic.bin", "dictionary": "model/fr.dict"]),
            try asset("vad", kind: .detector, locales: [], path: try plainFile("vad.download", StandardFiles.vad),
                      format: .file, files: ["model": "vad.onnx"]),
        ]
    }

    // MARK: Service

    func settings(maxReservedLocales: Int = 3, appQuotas: [String: Int] = [:], reservationExpiry: Double = 90 * 86400,
                  gcGracePeriod: Double = 86400, maxStoreSize: Int64 = 0) -> AssetSettings {
        AssetSettings(stateDirectory: stateDirectory, cacheDirectory: cacheDirectory, catalogURLs: [catalogURL], keyDirectories: [keysDirectory],
                      maxReservedLocales: maxReservedLocales, appQuotas: appQuotas, reservationExpiry: reservationExpiry,
                      gcGracePeriod: gcGracePeriod, maxStoreSize: maxStoreSize, gcInterval: 3600, download: .testing)
    }

    /// A started service with refreshed catalogs (every refresh must succeed); `run()` is not
    /// running yet. Its clock is ``clock`` unless `clock` is given (tests of real-time transfer
    /// progress pass the system clock).
    func makeService(_ settings: AssetSettings? = nil, clock: (any ServiceClock)? = nil) async throws -> ServiceHandle {
        let service = try AssetService(settings: settings ?? self.settings(), clock: clock ?? self.clock, log: logs.record)
        try await service.start()
        let refreshed = await service.refreshCatalogs()
        #expect(refreshed.allSatisfy { $0.outcome != .failed }, "catalog refresh: \(refreshed)")
        return ServiceHandle(service)
    }

    /// Runs `body` with a started service whose `run()` loop executes jobs, and stops it after.
    func withService(_ settings: AssetSettings? = nil, clock: (any ServiceClock)? = nil, running: Bool = true, _ body: (ServiceHandle) async throws -> Void) async throws {
        let handle = try await makeService(settings, clock: clock)
        if running { handle.startRunning() }
        do {
            try await body(handle)
            await handle.stop()
        } catch {
            await handle.stop()
            throw error
        }
    }

    // MARK: Looking at the disk

    /// Names in `path` (empty when it does not exist).
    func entries(_ path: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
    }

    func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    func contents(_ path: String) -> [UInt8]? { FileManager.default.contents(atPath: path).map { Array($0) } }

    func size(_ path: String) -> Int64? {
        (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int).map { Int64($0) }
    }

    func remove() { directory.remove() }
}

/// An `AssetService` and, once started, the child task running its `run()` loop.
final class ServiceHandle: @unchecked Sendable {
    let service: AssetService
    private var runner: Task<Void, Never>?

    init(_ service: AssetService) { self.service = service }

    /// Starts executing jobs (queued ones included).
    func startRunning() {
        let service = service
        runner = Task { await service.run() }
    }

    /// Shuts down the service and waits for the run loop to end.
    func stop() async {
        await service.shutdown()
        runner?.cancel()
        await runner?.value
        runner = nil
    }
}

/// Contents of the standard catalog's files.
enum StandardFiles {
    static func bytes(_ count: Int, seed: UInt64) -> [UInt8] { NginxServer.seededBytes(count: count, seed: seed) }
    static let txEn: [String: [UInt8]] = ["encoder.onnx": bytes(90_000, seed: 1), "tokens.txt": Array(repeating: UInt8(ascii: "t"), count: 10_000)]
    static let vad = bytes(50_000, seed: 6)
}

/// Module configurations used throughout.
enum Modules {
    static func transcriber(_ locale: String, preset: String? = nil, hints: [String] = []) -> ModuleConfiguration {
        ModuleConfiguration(kind: .transcriber, locale: locale, preset: preset, contentHints: hints)
    }

    static func dictation(_ locale: String) -> ModuleConfiguration { ModuleConfiguration(kind: .dictation, locale: locale) }

    static let detector = ModuleConfiguration(kind: .detector, locale: nil)
}

/// Polls `condition` every 10 ms until it holds; false after `timeout`.
func eventually(timeout: Duration = .seconds(10), _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return try await condition()
}

let appA = ClientIdentity(uid: 1000, appID: "org.example.a")
let appB = ClientIdentity(uid: 1000, appID: "org.example.b")
let otherUser = ClientIdentity(uid: 1001, appID: "org.example.a")

extension AssetError {
    /// The case's name (`quotaExceeded`, `verificationFailed`, …), for expectations.
    var caseName: String { Mirror(reflecting: self).children.first?.label ?? "\(self)" }
}
