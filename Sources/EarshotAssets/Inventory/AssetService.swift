import EarshotSystem
import EarshotWire
import Foundation

/// Settings of the asset inventory (from the daemon's config).
public struct AssetSettings: Sendable {
    public var stateDirectory: String
    public var cacheDirectory: String
    /// Catalog sources: `http(s)://` or `file://` URLs with the signature at `URL.minisig`, or
    /// `oci://` references to catalog artifacts in a registry (``OCIReference``).
    public var catalogURLs: [String]
    /// Directories of trusted minisign public keys (`*.pub`).
    public var keyDirectories: [String]
    public var maxReservedLocales: Int
    /// Most distinct locales one uid may reserve across all its app ids.
    public var maxReservedLocalesPerUser: Int
    /// Most app ids of one uid that may hold reservations.
    public var maxAppsPerUser: Int
    /// Per-app quota overrides (app id → maximum).
    public var appQuotas: [String: Int]
    /// Seconds a reservation may go unused before it expires.
    public var reservationExpiry: Double
    /// Seconds an unneeded asset is kept before GC removes it.
    public var gcGracePeriod: Double
    /// Largest total size of installed assets in bytes (0: no limit).
    public var maxStoreSize: Int64
    /// Seconds between automatic GC runs.
    public var gcInterval: Double
    /// Seconds the version an update replaced is kept for ``AssetService/rollback(_:requestedBy:)``
    /// (the store budget may remove it sooner); 0: retired once no lease holds it.
    public var keepPreviousFor: Double = 0
    public var download: DownloadOptions
    /// Credentials and plain-HTTP hosts for `oci://` sources and `publish`.
    public var registry = RegistrySettings()
    /// Bandwidth cap for unattended updates (bytes/s), if any.
    public var updateBandwidthLimit: Int64?
    /// Seconds between the service's own unattended update runs (``AssetService/update(dryRun:requestedBy:)``
    /// by `schedule`), the first at ``AssetService/run()``; 0: none (an update timer runs them).
    public var updateInterval: Double = 0
    /// Test hook: hold install jobs in this phase for this many seconds (crash-safety tests).
    public var testPause: (InstallPhase, Double)?

    public init(stateDirectory: String, cacheDirectory: String, catalogURLs: [String] = [], keyDirectories: [String] = [],
                maxReservedLocales: Int = 3, maxReservedLocalesPerUser: Int = 8, maxAppsPerUser: Int = 16, appQuotas: [String: Int] = [:], reservationExpiry: Double = 90 * 86400,
                gcGracePeriod: Double = 86400, maxStoreSize: Int64 = 0, gcInterval: Double = 3600,
                download: DownloadOptions = DownloadOptions(), updateBandwidthLimit: Int64? = nil) {
        self.stateDirectory = stateDirectory
        self.cacheDirectory = cacheDirectory
        self.catalogURLs = catalogURLs
        self.keyDirectories = keyDirectories
        self.maxReservedLocales = maxReservedLocales
        self.maxReservedLocalesPerUser = maxReservedLocalesPerUser
        self.maxAppsPerUser = maxAppsPerUser
        self.appQuotas = appQuotas
        self.reservationExpiry = reservationExpiry
        self.gcGracePeriod = gcGracePeriod
        self.maxStoreSize = maxStoreSize
        self.gcInterval = gcInterval
        self.download = download
        self.updateBandwidthLimit = updateBandwidthLimit
    }

    var assetsDirectory: String { stateDirectory + "/assets" }
    var stagingDirectory: String { stateDirectory + "/staging" }
    var downloadsDirectory: String { cacheDirectory + "/downloads" }

    /// Where `asset@version` is installed.
    func installDirectory(id: String, version: Int) -> String { assetsDirectory + "/\(id)/\(version)" }

    /// `path` as `installed_assets` stores it: relative to the state directory when inside it, so
    /// the state directory can move.
    func storedPath(_ path: String) -> String {
        path.hasPrefix(stateDirectory + "/") ? String(path.dropFirst(stateDirectory.count + 1)) : path
    }

    /// The absolute path of a stored one (relative paths are below the state directory).
    func resolvedPath(_ stored: String) -> String {
        stored.hasPrefix("/") ? stored : stateDirectory + "/" + stored
    }
}

/// An installed asset version as the store records it.
public struct InstalledAsset: Sendable, Hashable, Codable {
    public var entry: CatalogAsset
    /// The installed directory (absolute; the store keeps it relative to the state directory).
    public var path: String
    public var bytes: Int64
    /// Whether this is the version new sessions use (updates install side by side, then switch).
    public var current: Bool
    public var installedAt: Double
    public var lastUsed: Double
    /// Since when nothing has needed it (GC removes it after the grace period).
    public var unneededSince: Double?
    public var key: String { "\(entry.id)@\(entry.version)" }
}

/// The asset inventory: catalogs, resolution, reservations, shared install jobs, leases, GC and
/// updates. State lives in SQLite; files in `state/assets/<id>/<version>`. One actor; the blocking
/// parts (downloads, hashing, extraction, SQLite) run on their own threads and queues.
public actor AssetService {
    let settings: AssetSettings
    let database: InventoryStore
    /// Apps' prepared custom language models, collected with their reservations.
    public nonisolated let languageModels: LanguageModelStore
    /// Paces GC, download backoff and progress; dates expiry and grace periods.
    let clock: any ServiceClock
    let downloader: Downloader
    /// Talks to the registries of `oci://` catalog sources and publish targets.
    let registry: RegistryClient
    /// Serialises the critical sections that span `await`: GC, install decisions and commits,
    /// leases (``AsyncLock``).
    let gate = AsyncLock()
    /// Merged assets of every verified catalog.
    var catalogAssets: [CatalogAsset] = []
    /// Verified catalogs by source URL.
    var catalogs: [String: StoredCatalog] = [:]
    var trustedKeys: [MinisignPublicKey] = []
    var jobs: [String: InstallJob] = [:]
    /// Download-cache names of the files a running `publish` is fetching or uploading (kept by GC).
    var publishing: Set<String> = []
    var leases: [String: Int] = [:]
    /// Uses not written to the state database yet (a write under way, or refused by a full disk): ``DeferredUses``.
    var deferredUses = DeferredUses()
    /// The background write of ``deferredUses`` under way, if any.
    var deferredWrite: Task<Void, Never>?
    /// Set by ``shutdown()``: interrupted jobs keep their rows so the next start resumes them.
    var shuttingDown = false
    let jobQueue: AsyncStream<InstallJob>
    let jobSubmitter: AsyncStream<InstallJob>.Continuation
    let logSink: @Sendable (AssetLogEntry) -> Void
    /// Told about jobs, downloaded bytes, verification failures and GC runs (the daemon's metrics).
    let observer: (any AssetObserver)?

    /// Opens the store in `settings.stateDirectory` (creating it) and loads what it knows.
    public init(settings: AssetSettings, clock: any ServiceClock = SystemServiceClock(), observer: (any AssetObserver)? = nil,
                log: @escaping @Sendable (AssetLogEntry) -> Void = { _ in }) throws {
        for dir in [settings.stateDirectory, settings.cacheDirectory, settings.assetsDirectory, settings.downloadsDirectory] {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        }
        self.settings = settings
        self.clock = clock
        downloader = Downloader(clock: clock)
        registry = RegistryClient(settings: settings.registry, options: settings.download, clock: clock)
        logSink = log
        self.observer = observer
        database = try InventoryStore(directory: settings.stateDirectory)
        languageModels = LanguageModelStore(directory: settings.stateDirectory + "/language-models")
        (jobQueue, jobSubmitter) = AsyncStream.makeStream(of: InstallJob.self)
    }

    /// Loads keys and stored catalogs, cleans staging, repairs what a crash left uncommitted
    /// (re-identifying trees rather than deleting them), sweeps orphaned downloads, and queues
    /// unfinished install jobs. Call once before ``run()``.
    public func start() async throws {
        reloadKeys()
        try await loadStoredCatalogs()
        try await reconcile(repair: true)
        // Local sources load before the daemon answers anyone; remote ones in run().
        if settings.catalogURLs.contains(where: { catalogs[$0] == nil && $0.lowercased().hasPrefix("file:") }) {
            await refreshMissingCatalogs()
        }
        do {
            _ = try await sweepDownloads(dryRun: false)
        } catch {
            log("cleaning the download cache failed: \(error)")
        }
        for pending in try await pendingJobs() {
            log("resuming install of \(pending.entry.id)@\(pending.entry.version)")
            _ = job(for: pending.entry, bandwidthLimit: pending.bandwidthLimit, isUpdate: pending.isUpdate, requestedBy: pending.requestedBy)
        }
    }

    /// Fetches configured catalog sources for which nothing is stored yet (first start, new source).
    func refreshMissingCatalogs() async {
        guard settings.catalogURLs.contains(where: { catalogs[$0] == nil }) else { return }
        for result in await refreshCatalogs() where result.outcome != .failed && result.outcome != .unreachable {
            log("catalog \(result.url): \(result.outcome.rawValue)")
        }
    }

    /// Fetches missing catalogs (or, with an ``AssetSettings/updateInterval``, runs an update now
    /// and then every interval), then runs install jobs and periodic GC until ``shutdown()`` (or
    /// cancellation).
    public func run() async {
        await withDiscardingTaskGroup { group in
            group.addTask { [self] in
                guard settings.updateInterval > 0 else { return await refreshMissingCatalogs() }
                while !Task.isCancelled {
                    await scheduledUpdate()
                    try? await clock.sleep(for: .seconds(settings.updateInterval))
                }
            }
            group.addTask { [self] in
                while !Task.isCancelled {
                    try? await clock.sleep(for: .seconds(settings.gcInterval))
                    if Task.isCancelled { break }
                    do {
                        let report = try await collectGarbage(dryRun: false)
                        if !report.removed.isEmpty || !report.expiredReservations.isEmpty { log("gc: \(report.summary)") }
                    } catch {
                        log("gc refused: \(error)")
                    }
                }
            }
            for await job in jobQueue {
                group.addTask { [self] in await execute(job) }
            }
            group.cancelAll() // shut down: the timer loops end, the running jobs were cancelled
        }
    }

    /// Logs `message` at `priority` with structured journal `fields`.
    nonisolated func log(_ message: String, _ priority: AssetLogEntry.Priority = .info, _ fields: [String: String] = [:]) {
        logSink(AssetLogEntry(priority, message, fields: fields))
    }

    /// Runs `body` holding ``gate`` (not reentrant: `body` must not take it again).
    func exclusively<T, E: Error>(_ body: () async throws(E) -> T) async throws(E) -> T {
        await gate.acquire()
        do {
            let value = try await body()
            await gate.release()
            return value
        } catch {
            await gate.release()
            throw error
        }
    }

    /// Stops taking jobs (``run()`` returns once running jobs end; partial downloads stay) and
    /// writes the uses still pending (``DeferredUses``).
    public func shutdown() async {
        shuttingDown = true
        for job in jobs.values { job.cancel() }
        jobSubmitter.finish()
        await flushDeferredUses()
    }

    func reloadKeys() {
        var keys: [MinisignPublicKey] = []
        for dir in settings.keyDirectories where FileManager.default.fileExists(atPath: dir) {
            let loaded = Minisign.loadKeys(directory: dir)
            keys += loaded.keys
            for problem in loaded.problems { log("keys: \(problem)") }
        }
        trustedKeys = keys
    }

    // MARK: Resolution

    /// The best catalog asset for `module`, or why there is none.
    func resolve(_ module: ModuleConfiguration) throws(AssetError) -> CatalogAsset {
        let candidates = catalogAssets.filter { $0.kind == module.kind }
        let chosen: [CatalogAsset]
        if let requested = module.locale {
            guard let tag = LocaleTag(requested) else { throw .unsupportedLocale(requested) }
            // Every asset with a locale that serves the request competes (a multilingual `en` asset
            // serves `en-US` beside an `en-US` one); preference decides between them.
            chosen = candidates.filter { LocaleTag.bestMatch(for: tag, in: $0.locales.compactMap(LocaleTag.init)) != nil }
            guard !chosen.isEmpty else { throw .unsupportedLocale(requested) }
        } else {
            chosen = candidates.filter { $0.locales.isEmpty }
        }
        let hints = Set(module.contentHints)
        let translates = module.transcriptionOptions.contains(ModuleConfiguration.translateOption)
        let usable = chosen.filter { hints.isSubset(of: Set($0.capabilities.contentHints)) && (!translates || $0.capabilities.translation) }
        guard let best = usable.max(by: { Self.preference($0, for: module).lexicographicallyPrecedes(Self.preference($1, for: module)) }) else {
            if chosen.isEmpty, let locale = module.locale { throw .unsupportedLocale(locale) }
            if translates, !chosen.contains(where: \.capabilities.translation) {
                throw .unsupportedModule("no \(module.kind.rawValue) asset for \(module.locale ?? "this locale") can translate")
            }
            throw .unsupportedModule("\(module.kind.rawValue) module with content hints \(module.contentHints)")
        }
        return best
    }

    /// How well an asset fits what a module asks for, compared lexicographically: the capabilities
    /// its options use, then whether the catalog prefers it for the module's preset, then its
    /// catalog rank, then its version.
    static func preference(_ asset: CatalogAsset, for module: ModuleConfiguration) -> [Int] {
        let caps = asset.capabilities
        var fit = 0
        if module.reportingOptions.contains("volatileResults") || module.preset?.hasPrefix("progressive") == true, caps.streaming { fit += 8 }
        if module.reportingOptions.contains("alternativeTranscriptions"), caps.alternatives { fit += 4 }
        if module.attributeOptions.contains("audioTimeRange"), caps.timeRanges { fit += 2 }
        if module.attributeOptions.contains("transcriptionConfidence"), caps.confidence { fit += 1 }
        let preferred = module.preset.map { asset.preferredPresets.contains($0) } ?? false
        return [fit, preferred ? 1 : 0, asset.rank, asset.version]
    }

    /// Every asset `module` needs: its own, plus the detector asset for engines that need one. A
    /// module whose dependency no catalog lists is unsupported (it could install but never run).
    func requiredAssets(_ module: ModuleConfiguration) throws(AssetError) -> [CatalogAsset] {
        let own = try resolve(module)
        guard EngineKind(rawValue: own.engine)?.needsDetector == true else { return [own] }
        guard let detector = try? resolve(ModuleConfiguration(kind: .detector, locale: nil)) else {
            throw .unsupportedModule("\(own.id) (\(own.engine)) needs a voice activity detector asset, and no catalog lists one")
        }
        return [own, detector]
    }

    /// Every asset `modules` need, each once.
    func requiredAssets(_ modules: [ModuleConfiguration]) throws(AssetError) -> [CatalogAsset] {
        var assets: [CatalogAsset] = []
        for module in modules {
            for asset in try requiredAssets(module) where !assets.contains(where: { $0.id == asset.id }) { assets.append(asset) }
        }
        return assets
    }

    /// Installed versions of `assetID`, newest first.
    func installedVersions(_ assetID: String) async throws -> [InstalledAsset] {
        try await installedAssets().filter { $0.entry.id == assetID }.sorted { $0.entry.version > $1.entry.version }
    }

    /// The status of one module (Apple's four states).
    func status(of module: ModuleConfiguration, installed: [InstalledAsset]) -> AssetStatus {
        guard let assets = try? requiredAssets(module) else { return .unsupported }
        let missing = assets.filter { asset in !installed.contains { $0.entry.id == asset.id } }
        if missing.isEmpty { return .installed }
        if missing.allSatisfy({ asset in jobs.values.contains { $0.entry.id == asset.id } }) { return .downloading }
        return .supported
    }

    /// The aggregate and per-module status of `modules`.
    public func status(of modules: [ModuleConfiguration]) async throws -> (AssetStatus, [AssetStatus]) {
        let installed = try await installedAssets()
        let each = modules.map { status(of: $0, installed: installed) }
        return (AssetStatus.aggregate(each), each)
    }

    /// Supported (or installed) locales for `kind`, canonical and sorted.
    public func locales(kind: AssetKind, installedOnly: Bool) async throws -> [String] {
        let assets = installedOnly ? try await installedAssets().filter(\.current).map(\.entry) : catalogAssets
        let tags = Set(assets.filter { $0.kind == kind }.flatMap(\.locales).compactMap(LocaleTag.init))
        return tags.map(\.description).sorted()
    }

    /// The supported locale equivalent to `locale` for `kind`, if any.
    public func equivalentLocale(_ locale: String, kind: AssetKind) -> String? {
        guard let tag = LocaleTag(locale) else { return nil }
        let supported = Set(catalogAssets.filter { $0.kind == kind }.flatMap(\.locales).compactMap(LocaleTag.init))
        return LocaleTag.bestMatch(for: tag, in: supported.sorted { $0.description < $1.description })?.description
    }

    // MARK: Store queries

    /// Every installed asset version.
    public func installedAssets() async throws -> [InstalledAsset] {
        await settleDeferredUses()
        return try await database.read { [settings] db in
            try db.execute("SELECT entry, path, bytes, current, installed_at, last_used, unneeded_since FROM installed_assets ORDER BY id, version").map { row in
                guard let json = row[0].blob, let entry = try? JSONDecoder().decode(CatalogAsset.self, from: Data(json)) else {
                    throw AssetError.inconsistentState("unreadable installed_assets entry")
                }
                return InstalledAsset(entry: entry, path: settings.resolvedPath(row[1].text ?? ""), bytes: row[2].int ?? 0, current: row[3].int == 1,
                                      installedAt: row[4].double ?? 0, lastUsed: row[5].double ?? 0, unneededSince: row[6].double)
            }
        }
    }
}
