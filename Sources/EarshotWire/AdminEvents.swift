/// Admin events: every asset, the catalog, cancel, GC, update, hold. Refused with `permissionDenied`
/// unless the peer is an admin (root, the daemon's own uid, or a member of `AdminGroup`).

/// An installed asset version as `earshot.assets.result` reports it.
public struct InstalledAssetInfo: Codable, Sendable, Hashable {
    public var id: String
    public var version: Int
    public var kind: AssetKind
    public var engine: String
    public var locales: [String]
    public var bytes: Int64
    public var path: String
    public var current: Bool
    /// Sessions holding it now.
    public var leased: Bool
    /// Whether a reservation needs it.
    public var reserved: Bool
    public var installedAt: Double
    public var lastUsed: Double
    public var unneededSince: Double?
    public init(id: String, version: Int, kind: AssetKind, engine: String, locales: [String], bytes: Int64, path: String, current: Bool, leased: Bool, reserved: Bool, installedAt: Double, lastUsed: Double, unneededSince: Double?) {
        self.id = id
        self.version = version
        self.kind = kind
        self.engine = engine
        self.locales = locales
        self.bytes = bytes
        self.path = path
        self.current = current
        self.leased = leased
        self.reserved = reserved
        self.installedAt = installedAt
        self.lastUsed = lastUsed
        self.unneededSince = unneededSince
    }
    enum CodingKeys: String, CodingKey {
        case id, version, kind, engine, locales, bytes, path, current, leased, reserved
        case installedAt = "installed_at", lastUsed = "last_used", unneededSince = "unneeded_since"
    }
}

/// An in-flight install job.
public struct InstallJobInfo: Codable, Sendable, Hashable {
    public var asset: String
    public var version: Int
    public init(asset: String, version: Int) {
        self.asset = asset
        self.version = version
    }
}

/// `earshot.assets`: installed assets and running jobs (admin).
public struct AssetsRequest: WireEvent, Hashable {
    public static let eventType = "earshot.assets"
    public var id: String?
    public init(id: String? = nil) { self.id = id }
}

/// `earshot.assets.result`.
public struct AssetsReply: WireEvent, Hashable {
    public static let eventType = "earshot.assets.result"
    public var id: String?
    public var assets: [InstalledAssetInfo]
    public var jobs: [InstallJobInfo]
    public init(id: String?, assets: [InstalledAssetInfo], jobs: [InstallJobInfo]) {
        self.id = id
        self.assets = assets
        self.jobs = jobs
    }
}

/// `earshot.catalog`: the merged catalog and its sources.
public struct CatalogRequest: WireEvent, Hashable {
    public static let eventType = "earshot.catalog"
    public var id: String?
    /// Fetch every source first (admin).
    public var refresh: Bool
    public init(id: String? = nil, refresh: Bool = false) {
        self.id = id
        self.refresh = refresh
    }
}

/// One catalog source.
public struct CatalogSourceInfo: Codable, Sendable, Hashable {
    public var url: String
    public var version: Int64?
    public var keyId: String?
    /// After a refresh: `updated`, `unchanged` or `failed`.
    public var outcome: String?
    public var message: String?
    public init(url: String, version: Int64?, keyId: String?, outcome: String?, message: String?) {
        self.url = url
        self.version = version
        self.keyId = keyId
        self.outcome = outcome
        self.message = message
    }
    enum CodingKeys: String, CodingKey { case url, version, keyId = "key_id", outcome, message }
}

/// A catalog asset as listed by `earshot.catalog.result`.
public struct CatalogAssetInfo: Codable, Sendable, Hashable {
    public var id: String
    public var version: Int
    public var kind: AssetKind
    public var engine: String
    public var locales: [String]
    public var size: Int64
    public var license: String
    /// Whether this version is installed.
    public var installed: Bool
    /// The current installed version of this asset, when one is (older while an update is due).
    public var installedVersion: Int?
    /// The version this asset is held at (`earshot.hold`: updates skip it), when held.
    public var heldVersion: Int?
    public init(id: String, version: Int, kind: AssetKind, engine: String, locales: [String], size: Int64, license: String, installed: Bool,
                installedVersion: Int? = nil, heldVersion: Int? = nil) {
        self.installedVersion = installedVersion
        self.heldVersion = heldVersion
        self.id = id
        self.version = version
        self.kind = kind
        self.engine = engine
        self.locales = locales
        self.size = size
        self.license = license
        self.installed = installed
    }
    enum CodingKeys: String, CodingKey { case id, version, kind, engine, locales, size, license, installed, installedVersion = "installed_version", heldVersion = "held_version" }
}

/// `earshot.catalog.result`.
public struct CatalogReply: WireEvent, Hashable {
    public static let eventType = "earshot.catalog.result"
    public var id: String?
    public var sources: [CatalogSourceInfo]
    public var assets: [CatalogAssetInfo]
    public init(id: String?, sources: [CatalogSourceInfo], assets: [CatalogAssetInfo]) {
        self.id = id
        self.sources = sources
        self.assets = assets
    }
}

/// `earshot.cancel`: stop the install of an asset (admin); the partial download is kept.
public struct CancelInstallRequest: WireEvent, Hashable {
    public static let eventType = "earshot.cancel"
    public var id: String?
    public var asset: String
    public init(id: String? = nil, asset: String) {
        self.id = id
        self.asset = asset
    }
}

/// `earshot.cancel.result`.
public struct CancelInstallReply: WireEvent, Hashable {
    public static let eventType = "earshot.cancel.result"
    public var id: String?
    public var cancelled: Bool
    public init(id: String?, cancelled: Bool) {
        self.id = id
        self.cancelled = cancelled
    }
}

/// `earshot.rollback`: make the kept previous version of `asset` current again (admin).
public struct RollbackRequest: WireEvent, Hashable {
    public static let eventType = "earshot.rollback"
    public var id: String?
    public var asset: String
    public init(id: String? = nil, asset: String) {
        self.id = id
        self.asset = asset
    }
}

/// `earshot.rollback.result`: the versions switched between.
public struct RollbackReply: WireEvent, Hashable {
    public static let eventType = "earshot.rollback.result"
    public var id: String?
    public var asset: String
    public var fromVersion: Int
    public var toVersion: Int
    public init(id: String?, asset: String, fromVersion: Int, toVersion: Int) {
        self.id = id
        self.asset = asset
        self.fromVersion = fromVersion
        self.toVersion = toVersion
    }
    enum CodingKeys: String, CodingKey { case id, asset, fromVersion = "from_version", toVersion = "to_version" }
}

/// `earshot.gc`: run garbage collection now (admin).
public struct GCRequest: WireEvent, Hashable {
    public static let eventType = "earshot.gc"
    public var id: String?
    public var dryRun: Bool
    public init(id: String? = nil, dryRun: Bool = false) {
        self.id = id
        self.dryRun = dryRun
    }
    enum CodingKeys: String, CodingKey { case id, dryRun = "dry_run" }
}

/// One asset version GC removed.
public struct GCRemovalInfo: Codable, Sendable, Hashable {
    public var asset: String
    public var bytes: Int64
    public var reason: String
    public init(asset: String, bytes: Int64, reason: String) {
        self.asset = asset
        self.bytes = bytes
        self.reason = reason
    }
}

/// `earshot.gc.result`.
public struct GCReply: WireEvent, Hashable {
    public static let eventType = "earshot.gc.result"
    public var id: String?
    public var dryRun: Bool
    public var removed: [GCRemovalInfo]
    public var freedBytes: Int64
    public var expiredReservations: [ReservationInfo]
    public init(id: String?, dryRun: Bool, removed: [GCRemovalInfo], freedBytes: Int64, expiredReservations: [ReservationInfo]) {
        self.id = id
        self.dryRun = dryRun
        self.removed = removed
        self.freedBytes = freedBytes
        self.expiredReservations = expiredReservations
    }
    enum CodingKeys: String, CodingKey {
        case id, dryRun = "dry_run", removed, freedBytes = "freed_bytes", expiredReservations = "expired_reservations"
    }
}

/// `earshot.update`: refresh catalogs and update installed assets (admin); install progress events
/// follow. With `dry_run` catalogs are fetched and verified but nothing is stored or installed.
public struct UpdateRequest: WireEvent, Hashable {
    public static let eventType = "earshot.update"
    public var id: String?
    public var dryRun: Bool
    /// The run is the update timer's (`earshotctl update --timer`, as `earshot-update.service`
    /// passes it): only a label in the log ("by timer"; the journal's `requester_uid` still names
    /// the peer), it grants nothing.
    public var timer: Bool
    public init(id: String? = nil, dryRun: Bool = false, timer: Bool = false) {
        self.id = id
        self.dryRun = dryRun
        self.timer = timer
    }
    enum CodingKeys: String, CodingKey { case id, dryRun = "dry_run", timer }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decodeIfPresent(String.self, forKey: .id)
        dryRun = try c.decodeIfPresent(Bool.self, forKey: .dryRun) ?? false
        timer = try c.decodeIfPresent(Bool.self, forKey: .timer) ?? false
    }
}

/// One asset an update installs (or would install).
public struct UpdatePlanInfo: Codable, Sendable, Hashable {
    public var asset: String
    public var fromVersion: Int
    public var toVersion: Int
    /// Bytes still to download.
    public var downloadBytes: Int64
    /// What is left to download plus the installed size.
    public var spaceNeeded: Int64
    /// Bytes freed once the old version is retired.
    public var frees: Int64
    public init(asset: String, fromVersion: Int, toVersion: Int, downloadBytes: Int64, spaceNeeded: Int64, frees: Int64) {
        self.asset = asset
        self.fromVersion = fromVersion
        self.toVersion = toVersion
        self.downloadBytes = downloadBytes
        self.spaceNeeded = spaceNeeded
        self.frees = frees
    }
    enum CodingKeys: String, CodingKey {
        case asset, fromVersion = "from_version", toVersion = "to_version", downloadBytes = "download_bytes", spaceNeeded = "space_needed", frees
    }
}

/// `earshot.update.result`.
public struct UpdateReply: WireEvent, Hashable {
    public static let eventType = "earshot.update.result"
    public var id: String?
    public var catalogs: [CatalogSourceInfo]
    /// `id@old→new` per updated asset.
    public var updated: [String]
    /// Failures an admin must look at (signature, rollback, hash, disk).
    public var failed: [String]
    /// Downloads that reached no mirror; the next run tries again.
    public var deferred: [String]
    /// False when nothing changed (`earshotctl update` exits 2).
    public var changed: Bool
    public var dryRun: Bool
    /// Every asset with a newer catalog version and what installing it takes.
    public var planned: [UpdatePlanInfo]
    /// Assets with a newer catalog version that are held (`earshot.hold`): skipped.
    public var held: [UpdatePlanInfo]
    public init(id: String?, catalogs: [CatalogSourceInfo], updated: [String], failed: [String], deferred: [String] = [], changed: Bool,
                dryRun: Bool = false, planned: [UpdatePlanInfo] = [], held: [UpdatePlanInfo] = []) {
        self.id = id
        self.catalogs = catalogs
        self.updated = updated
        self.failed = failed
        self.deferred = deferred
        self.changed = changed
        self.dryRun = dryRun
        self.planned = planned
        self.held = held
    }
    enum CodingKeys: String, CodingKey { case id, catalogs, updated, failed, deferred, changed, dryRun = "dry_run", planned, held }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decodeIfPresent(String.self, forKey: .id)
        catalogs = try c.decode([CatalogSourceInfo].self, forKey: .catalogs)
        updated = try c.decode([String].self, forKey: .updated)
        failed = try c.decode([String].self, forKey: .failed)
        deferred = try c.decodeIfPresent([String].self, forKey: .deferred) ?? []
        changed = try c.decode(Bool.self, forKey: .changed)
        dryRun = try c.decodeIfPresent(Bool.self, forKey: .dryRun) ?? false
        planned = try c.decodeIfPresent([UpdatePlanInfo].self, forKey: .planned) ?? []
        held = try c.decodeIfPresent([UpdatePlanInfo].self, forKey: .held) ?? []
    }
}

/// `earshot.hold`: pin `asset` at its installed version, so updates (the timer's and manual ones)
/// skip it, or with `hold` false release the pin (admin).
public struct HoldRequest: WireEvent, Hashable {
    public static let eventType = "earshot.hold"
    public var id: String?
    public var asset: String
    public var hold: Bool
    public init(id: String? = nil, asset: String, hold: Bool) {
        self.id = id
        self.asset = asset
        self.hold = hold
    }
}

/// `earshot.hold.result`: the version held (or released), and whether anything changed.
public struct HoldReply: WireEvent, Hashable {
    public static let eventType = "earshot.hold.result"
    public var id: String?
    public var asset: String
    /// The held version (on release: the version that was held; nil when none was).
    public var version: Int?
    public var held: Bool
    /// False when the asset already was (or was not) held.
    public var changed: Bool
    public init(id: String?, asset: String, version: Int?, held: Bool, changed: Bool) {
        self.id = id
        self.asset = asset
        self.version = version
        self.held = held
        self.changed = changed
    }
}

/// One installed asset's versions, as `earshot.status.result` shows them to admins.
public struct AssetVersionsInfo: Codable, Sendable, Hashable {
    public var id: String
    /// The version new sessions use.
    public var installed: Int?
    /// The newest version the catalogs list (nil: none lists it any more).
    public var available: Int?
    /// The version the asset is held at (updates skip it), when held.
    public var held: Int?
    /// The version kept for `earshotctl rollback`, if any.
    public var previous: Int?
    /// Until when (wall-clock seconds) the rollback window keeps ``previous``; nil when no window
    /// applies (it goes once no session holds it). The store budget may remove it sooner.
    public var previousKeptUntil: Double?
    public init(id: String, installed: Int?, available: Int?, held: Int?, previous: Int?, previousKeptUntil: Double?) {
        self.id = id
        self.installed = installed
        self.available = available
        self.held = held
        self.previous = previous
        self.previousKeptUntil = previousKeptUntil
    }
    enum CodingKeys: String, CodingKey { case id, installed, available, held, previous, previousKeptUntil = "previous_kept_until" }
}

/// The last real (not dry) update run.
public struct UpdateRunInfo: Codable, Sendable, Hashable {
    /// Wall-clock seconds.
    public var finishedAt: Double
    /// `timer`, `schedule` (the daemon's own, `[Assets] UpdateIntervalSec`) or `uid N`.
    public var requestedBy: String
    /// `changed`, `unchanged` (nothing newer, or no source reachable) or `failed` (needs an admin),
    /// as `earshotctl update`'s exit codes 0, 2 and 1.
    public var outcome: String
    /// What it updated, deferred, skipped or failed.
    public var summary: String
    public init(finishedAt: Double, requestedBy: String, outcome: String, summary: String) {
        self.finishedAt = finishedAt
        self.requestedBy = requestedBy
        self.outcome = outcome
        self.summary = summary
    }
    enum CodingKeys: String, CodingKey { case finishedAt = "finished_at", requestedBy = "requested_by", outcome, summary }
}

/// `earshot.stats`: analysis sessions and loaded models.
public struct StatsRequest: WireEvent, Hashable {
    public static let eventType = "earshot.stats"
    public var id: String?
    public init(id: String? = nil) { self.id = id }
}

/// One loaded model.
public struct LoadedModelInfo: Codable, Sendable, Hashable {
    /// `asset@version` and load settings.
    public var key: String
    /// Sessions using it now.
    public var users: Int
    /// Approximate resident memory it holds.
    public var memoryBytes: Int
    public init(key: String, users: Int, memoryBytes: Int) {
        self.key = key
        self.users = users
        self.memoryBytes = memoryBytes
    }
    enum CodingKeys: String, CodingKey { case key, users, memoryBytes = "memory_bytes" }
}

/// One value of the daemon's metrics, as `GET /metrics` exposes it (Docs/HTTP.md): a counter's or
/// gauge's value, or for a histogram the sum (`value`) and number (`count`) of its observations.
public struct MetricSampleInfo: Codable, Sendable, Hashable {
    public var name: String
    /// `counter`, `gauge` or `histogram`.
    public var kind: String
    public var labels: [String: String]
    public var value: Double
    public var count: Int?
    public init(name: String, kind: String, labels: [String: String], value: Double, count: Int? = nil) {
        self.name = name
        self.kind = kind
        self.labels = labels
        self.value = value
        self.count = count
    }
}

/// `earshot.stats.result`.
public struct StatsReply: WireEvent, Hashable {
    public static let eventType = "earshot.stats.result"
    public var id: String?
    public var sessions: Int
    public var models: [LoadedModelInfo]
    /// Model loads since start (a model shared by several sessions loads once).
    public var modelLoads: Int
    /// Resident memory of the daemon.
    public var residentBytes: Int
    /// The part of it that is the daemon's own heap (anonymous pages): what grows if anything leaks.
    public var anonymousBytes: Int?
    /// The file-backed part (shared libraries, mapped model files), which the kernel can reclaim.
    public var fileBytes: Int?
    /// Live session objects by kind (`AnalysisSession`, `PocketSphinxDecoder`, `SileroDetector`,
    /// `Resampler`, `WyomingTranscription`): diagnostics that show whether ended sessions are freed.
    public var liveObjects: [String: Int]?
    /// How many of the live `SileroDetector`s are spares: finished sessions' detectors kept for the
    /// next session while a model is loaded.
    public var spareDetectors: Int?
    /// Open sessions by engine (a session with modules on two engines counts under both).
    public var sessionsByEngine: [String: Int]?
    /// Every value of the daemon's metrics (the same counters `GET /metrics` serves).
    public var metrics: [MetricSampleInfo]?
    /// The engine process (`earshot-engine`, where Whisper and silero run) while one runs: it
    /// holds the models' memory, which leaves with it when the last model is unloaded.
    public var engineProcess: EngineProcessInfo?
    public init(id: String?, sessions: Int, models: [LoadedModelInfo], modelLoads: Int, residentBytes: Int,
                anonymousBytes: Int? = nil, fileBytes: Int? = nil, liveObjects: [String: Int]? = nil,
                sessionsByEngine: [String: Int]? = nil, metrics: [MetricSampleInfo]? = nil, spareDetectors: Int? = nil,
                engineProcess: EngineProcessInfo? = nil) {
        self.id = id
        self.engineProcess = engineProcess
        self.sessions = sessions
        self.sessionsByEngine = sessionsByEngine
        self.metrics = metrics
        self.models = models
        self.modelLoads = modelLoads
        self.residentBytes = residentBytes
        self.anonymousBytes = anonymousBytes
        self.fileBytes = fileBytes
        self.liveObjects = liveObjects
        self.spareDetectors = spareDetectors
    }
    enum CodingKeys: String, CodingKey { case id, sessions, models, modelLoads = "model_loads", residentBytes = "resident_bytes",
                               anonymousBytes = "anonymous_bytes", fileBytes = "file_bytes", liveObjects = "live_objects",
                               sessionsByEngine = "sessions_by_engine", metrics, spareDetectors = "spare_detectors",
                               engineProcess = "engine_process" }
}

/// The running engine process in ``StatsReply``.
public struct EngineProcessInfo: Codable, Sendable, Hashable {
    public var pid: Int32
    public var anonymousBytes: Int
    public var fileBytes: Int
    public init(pid: Int32, anonymousBytes: Int, fileBytes: Int) {
        self.pid = pid
        self.anonymousBytes = anonymousBytes
        self.fileBytes = fileBytes
    }
    enum CodingKeys: String, CodingKey { case pid, anonymousBytes = "anonymous_bytes", fileBytes = "file_bytes" }
}

/// `earshot.publish` (admin): copy the daemon's verified catalog and the assets it lists into an
/// OCI registry repository (`oci://HOST[:PORT]/REPOSITORY:TAG`). Progress events
/// (``InstallProgress``, phases `downloading`, `verifying`, `uploading`) follow until the reply.
public struct PublishRequest: WireEvent, Hashable {
    public static let eventType = "earshot.publish"
    public var id: String?
    public var target: String
    /// The catalog source to publish; nil when only one source has a catalog.
    public var catalog: String?
    /// Only these asset ids; nil: every asset the catalog lists.
    public var assets: [String]?
    public var dryRun: Bool
    public init(id: String? = nil, target: String, catalog: String? = nil, assets: [String]? = nil, dryRun: Bool = false) {
        self.id = id
        self.target = target
        self.catalog = catalog
        self.assets = assets
        self.dryRun = dryRun
    }
    enum CodingKeys: String, CodingKey { case id, target, catalog, assets, dryRun = "dry_run" }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decodeIfPresent(String.self, forKey: .id)
        target = try c.decode(String.self, forKey: .target)
        catalog = try c.decodeIfPresent(String.self, forKey: .catalog)
        assets = try c.decodeIfPresent([String].self, forKey: .assets)
        dryRun = try c.decodeIfPresent(Bool.self, forKey: .dryRun) ?? false
    }
}

/// One blob of a publish and what happened to it.
public struct PublishedBlob: Codable, Sendable, Hashable {
    public enum Action: String, Codable, Sendable {
        /// Uploaded now; already in the repository (skipped); would be uploaded (dry run).
        case pushed, present, wouldPush = "would_push"
    }
    /// `id@version` of an asset, or `catalog`, `signature`, `config`.
    public var name: String
    public var digest: String
    public var size: Int64
    public var action: Action
    public init(name: String, digest: String, size: Int64, action: Action) {
        self.name = name
        self.digest = digest
        self.size = size
        self.action = action
    }
}

/// Reply to ``PublishRequest``.
public struct PublishReply: WireEvent, Hashable {
    public static let eventType = "earshot.publish.reply"
    public var id: String?
    public var target: String
    public var catalogVersion: Int64
    /// The manifest written (nil on a dry run).
    public var manifestDigest: String?
    public var dryRun: Bool
    public var blobs: [PublishedBlob]
    public init(id: String?, target: String, catalogVersion: Int64, manifestDigest: String?, dryRun: Bool, blobs: [PublishedBlob]) {
        self.id = id
        self.target = target
        self.catalogVersion = catalogVersion
        self.manifestDigest = manifestDigest
        self.dryRun = dryRun
        self.blobs = blobs
    }
    enum CodingKeys: String, CodingKey {
        case id, target, catalogVersion = "catalog_version", manifestDigest = "manifest_digest", dryRun = "dry_run", blobs
    }
}
