import EarshotWire
import Foundation

/// A verified catalog from one source, as stored in the state database.
struct StoredCatalog: Sendable {
    var url: String
    var catalog: Catalog
    var body: [UInt8]
    var signature: String
    var keyID: String
    var etag: String?
    var lastModified: String?
    var fetchedAt: Double
}

/// A catalog document and its signature as a source delivered them, not yet verified.
struct CatalogDocument: Sendable {
    var body: [UInt8]
    var signature: String
    /// The validator a later refresh sends or compares (an HTTP ETag; a registry's manifest digest).
    var etag: String?
    var lastModified: String?
}

/// What refreshing one catalog source did.
public struct CatalogRefreshResult: Sendable, Codable, Hashable {
    public enum Outcome: String, Sendable, Codable {
        /// `unreachable`: the source could not be reached (DNS, connection, timeout, a 5xx); the
        /// stored catalog stays and the next run tries again. `failed`: it answered with something
        /// an admin must look at (a bad signature, a rollback, a missing file, a TLS failure).
        case updated, unchanged, unreachable, failed
    }
    public var url: String
    public var outcome: Outcome
    public var version: Int64?
    public var message: String?
}

/// What `update` did (or, on a dry run, would do).
public struct UpdateReport: Sendable, Codable, Hashable {
    public var dryRun: Bool
    public var catalogs: [CatalogRefreshResult]
    /// Every asset with a newer catalog version, with what it takes (held ones excepted).
    public var planned: [UpdatePlanInfo]
    /// Assets with a newer catalog version that are held (``AssetService/hold(_:requestedBy:)``): skipped.
    public var held: [UpdatePlanInfo]
    /// `id@old→new` for each asset updated.
    public var updated: [String]
    /// Failures an admin must look at (verification, disk, a download refused for a known-bad hash).
    public var failed: [String]
    /// Downloads that could not reach any mirror; the next run tries again.
    public var deferred: [String]
    /// Whether anything changed (a dry run: would change).
    public var changed: Bool
}

extension AssetService {
    /// Largest catalog or signature document accepted.
    static let maxCatalogBytes = 16 << 20

    func loadStoredCatalogs() async throws {
        let rows = try await database.read { db in
            try db.execute("SELECT url, body, signature, key_id, etag, last_modified, fetched_at FROM catalog_sources")
        }
        for row in rows {
            guard let url = row[0].text, let body = row[1].blob, let signature = row[2].text else { continue }
            do {
                let verified = try SignedCatalog.verify(catalogBytes: body, signatureText: signature, trustedKeys: trustedKeys, currentVersion: nil)
                catalogs[url] = StoredCatalog(url: url, catalog: verified.catalog, body: body, signature: signature, keyID: verified.keyIDHex,
                                              etag: row[4].text, lastModified: row[5].text, fetchedAt: row[6].double ?? 0)
            } catch {
                log("stored catalog from \(url) no longer verifies (\(error)); ignoring it")
            }
        }
        recomputeCatalogAssets()
    }

    func recomputeCatalogAssets() {
        // Configured sources first, in order; stored catalogs of sources no longer configured are ignored.
        catalogAssets = Catalog.merged(settings.catalogURLs.compactMap { catalogs[$0]?.catalog })
    }

    /// Fetches every configured catalog (conditional GET), verifies its signature and version, and
    /// keeps the current one on any failure.
    public func refreshCatalogs() async -> [CatalogRefreshResult] {
        await exclusively { () async -> [CatalogRefreshResult] in
            let (results, _) = await fetchCatalogs(store: true)
            return results
        }
    }

    /// Fetches and verifies every configured catalog; with `store` the new ones replace the
    /// stored ones, without (a dry run) they are only returned. Callers hold ``gate``.
    func fetchCatalogs(store: Bool) async -> ([CatalogRefreshResult], [String: StoredCatalog]) {
        reloadKeys()
        var results: [CatalogRefreshResult] = []
        var fetched: [String: StoredCatalog] = [:]
        for url in settings.catalogURLs {
            let (result, record) = await refresh(url, store: store)
            results.append(result)
            fetched[url] = record
        }
        if store { recomputeCatalogAssets() }
        return (results, fetched)
    }

    private func refresh(_ url: String, store: Bool) async -> (CatalogRefreshResult, StoredCatalog?) {
        let stored = catalogs[url]
        do {
            guard let document = try await fetchCatalogDocument(url, stored: stored) else {
                return (CatalogRefreshResult(url: url, outcome: .unchanged, version: stored?.catalog.version, message: "not modified"), nil)
            }
            let verified = try SignedCatalog.verify(catalogBytes: document.body, signatureText: document.signature,
                                                    trustedKeys: trustedKeys, currentVersion: stored?.catalog.version)
            if let stored, stored.catalog.version == verified.catalog.version {
                // A catalog changes only with a new version; a different body under the same one is refused.
                guard stored.body == document.body else {
                    throw AssetError.verificationFailed("catalog changed without raising its version (\(stored.catalog.version))")
                }
                // The same catalog under a new validator (republished with other assets, say):
                // remember the validator, so the next refresh is a revalidation again.
                if store, document.etag != stored.etag || document.lastModified != stored.lastModified {
                    try await database.write { db in
                        try db.execute("UPDATE catalog_sources SET etag = ?, last_modified = ? WHERE url = ?",
                                       [document.etag.map { .text($0) } ?? .null, document.lastModified.map { .text($0) } ?? .null, .text(url)])
                    }
                    catalogs[url]?.etag = document.etag
                    catalogs[url]?.lastModified = document.lastModified
                }
                return (CatalogRefreshResult(url: url, outcome: .unchanged, version: stored.catalog.version, message: nil), nil)
            }
            let record = StoredCatalog(url: url, catalog: verified.catalog, body: document.body, signature: document.signature,
                                       keyID: verified.keyIDHex, etag: document.etag, lastModified: document.lastModified, fetchedAt: clock.wallTime())
            if store {
                try await database.write { db in
                    try db.execute("""
                        INSERT OR REPLACE INTO catalog_sources (url, version, body, signature, key_id, etag, last_modified, fetched_at)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                        """, [.text(url), .int(record.catalog.version), .blob(record.body), .text(record.signature), .text(record.keyID),
                              record.etag.map { .text($0) } ?? .null, record.lastModified.map { .text($0) } ?? .null, .double(record.fetchedAt)])
                }
                catalogs[url] = record
            }
            return (CatalogRefreshResult(url: url, outcome: .updated, version: record.catalog.version, message: nil), record)
        } catch {
            if let refusal = error as? CatalogError, case .signature = refusal { observer?.verificationFailed(.signature) }
            let unreachable = (error as? DownloadError)?.isUnreachable ?? (error as? RegistryError)?.isTransient ?? false
            let kept = stored.map { "keeping version \($0.catalog.version)" } ?? "no catalog from it yet"
            log("catalog \(url) \(unreachable ? "unreachable" : "refused"): \(error); \(kept)", .warning,
                ["source": url, "reason": "\(error)", "kept_version": stored.map { "\($0.catalog.version)" } ?? "none"])
            return (CatalogRefreshResult(url: url, outcome: unreachable ? .unreachable : .failed, version: stored?.catalog.version, message: "\(error)"), nil)
        }
    }

    /// The signed document and signature from `url`, nil when the source says the stored copy is
    /// current. HTTP and file sources: a conditional GET of `URL` and `URL.minisig`. `oci://`
    /// sources: the catalog artifact's manifest, revalidated by its digest (kept as the ETag).
    private func fetchCatalogDocument(_ url: String, stored: StoredCatalog?) async throws -> CatalogDocument? {
        if OCIReference.isOCI(url) {
            let reference = try OCIReference.parse(url)
            guard let pulled = try await registry.pullCatalog(reference, knownDigest: stored?.etag, maxCatalogBytes: Self.maxCatalogBytes) else { return nil }
            return CatalogDocument(body: pulled.body, signature: String(decoding: pulled.signature, as: UTF8.self), etag: pulled.manifestDigest, lastModified: nil)
        }
        let document = try await downloader.fetch(url: url, etag: stored?.etag, lastModified: stored?.lastModified, maxBytes: Self.maxCatalogBytes, options: settings.download)
        if document.notModified, stored != nil { return nil }
        let signature = try await downloader.fetch(url: url + ".minisig", etag: nil, lastModified: nil, maxBytes: 64 << 10, options: settings.download)
        return CatalogDocument(body: document.body, signature: String(decoding: signature.body, as: UTF8.self), etag: document.etag, lastModified: document.lastModified)
    }

    /// The registries that can serve `entry`'s bytes by digest (every `oci://` source whose catalog
    /// lists them), then the entry's own URLs: the mirrors of its download, in order. A registry
    /// that cannot be reached or lacks the blob is left out (logged) and the next mirror serves.
    func mirrors(for entry: CatalogAsset) async -> (urls: [String], access: [String: MirrorAccess]) {
        var urls: [String] = []
        var access: [String: MirrorAccess] = [:]
        for source in settings.catalogURLs where OCIReference.isOCI(source) {
            guard let catalog = catalogs[source]?.catalog, catalog.assets.contains(where: { $0.sha256 == entry.sha256 }),
                  let reference = try? OCIReference.parse(source) else { continue }
            do {
                let mirror = try await registry.blobMirror(reference, digest: "sha256:" + entry.sha256)
                urls.append(mirror.url)
                access[mirror.url] = mirror.access
            } catch {
                log("registry \(reference) cannot serve \(entry.id)@\(entry.version): \(error); using the next source", .warning,
                    ["asset": entry.id, "source": source, "reason": "\(error)"])
            }
        }
        return (urls + entry.urls.filter { !urls.contains($0) }, access)
    }

    /// Seconds since this daemon fetched the catalog version in use, by source URL (sources
    /// without a catalog are absent).
    public func catalogAges() -> [String: Double] {
        let now = clock.wallTime()
        return Dictionary(settings.catalogURLs.compactMap { url in catalogs[url].map { (url, max(0, now - $0.fetchedAt)) } }, uniquingKeysWith: max)
    }

    /// The merged catalog assets and the sources they came from.
    public func catalogSummary() -> (assets: [CatalogAsset], sources: [(url: String, version: Int64?, keyID: String?)]) {
        (catalogAssets, settings.catalogURLs.map { ($0, catalogs[$0]?.catalog.version, catalogs[$0]?.keyID) })
    }

    /// Refreshes catalogs, installs newer versions of installed assets side by side (switching each
    /// atomically when it commits) and retires old versions nobody uses; held assets are skipped
    /// and reported. A dry run fetches and verifies the catalogs but stores nothing, starts
    /// nothing and reports the plan. `requestedBy` (`timer`, `uid 1000`) goes into the log line of
    /// every change and the recorded last run (``lastUpdate()``; dry runs record nothing).
    public func update(dryRun: Bool = false, requestedBy: String) async -> UpdateReport {
        let (refreshed, fetched) = await exclusively { await fetchCatalogs(store: !dryRun) }
        let assets = dryRun ? Catalog.merged(settings.catalogURLs.compactMap { (fetched[$0] ?? catalogs[$0])?.catalog }) : catalogAssets
        let candidates = (try? await updatePlan(assets)) ?? []
        let holds = (try? await holds()) ?? [:]
        let plan = candidates.filter { holds[$0.entry.id] == nil }
        let held = candidates.filter { holds[$0.entry.id] != nil }.map(\.item)
        for item in held where !dryRun {
            log("update of \(item.asset) skipped: held at version \(item.fromVersion) (\(item.toVersion) available)", .info,
                ["asset": item.asset, "from_version": "\(item.fromVersion)", "to_version": "\(item.toVersion)", "requested_by": requestedBy])
        }
        guard !dryRun else {
            let changed = !plan.isEmpty || refreshed.contains { $0.outcome == .updated }
            return UpdateReport(dryRun: true, catalogs: refreshed, planned: plan.map(\.item), held: held, updated: [], failed: [], deferred: [], changed: changed)
        }
        var updated: [String] = []
        var failed: [String] = []
        var deferred: [String] = []
        // The job logs the change once ("updated X 1 → 2 (by …)"), whoever else joins it.
        let started = plan.map { ($0, job(for: $0.entry, bandwidthLimit: settings.updateBandwidthLimit, isUpdate: true, requestedBy: requestedBy)) }
        for (step, job) in started {
            let item = step.item
            do {
                try await job.wait()
                updated.append("\(item.asset)@\(item.fromVersion)→\(item.toVersion)")
            } catch {
                let line = AssetError.describe(error, naming: "\(item.asset)@\(item.toVersion)")
                if case .downloadFailed = error as? AssetError { deferred.append(line) } else { failed.append(line) }
            }
        }
        if !updated.isEmpty { _ = try? await collectGarbage(dryRun: false) }
        let changed = !updated.isEmpty || refreshed.contains { $0.outcome == .updated }
        let report = UpdateReport(dryRun: false, catalogs: refreshed, planned: plan.map(\.item), held: held, updated: updated, failed: failed, deferred: deferred, changed: changed)
        await recordUpdateRun(report, requestedBy: requestedBy)
        return report
    }

    /// One unattended update run of the service's own schedule (user mode has no update timer):
    /// changes are logged by their jobs; what failed or was put off is a warning here.
    func scheduledUpdate() async {
        let report = await update(requestedBy: "schedule")
        let problems = report.failed.map { "failed \($0)" } + report.deferred.map { "deferred \($0)" }
        if !problems.isEmpty {
            log("scheduled update: \(problems.joined(separator: "; "))", .warning, ["requested_by": "schedule"])
        }
    }

    /// For each current installed asset with a newer version in `assets`: the newest, and what
    /// installing it takes. A version still installed but not current was rolled back from: it is
    /// not installed again (a newer one is).
    func updatePlan(_ assets: [CatalogAsset]) async throws -> [(entry: CatalogAsset, item: UpdatePlanInfo)] {
        let installed = try await installedAssets()
        return installed.filter(\.current).compactMap { current in
            guard let newer = assets.filter({ $0.id == current.entry.id && $0.version > current.entry.version }).max(by: { $0.version < $1.version }),
                  !installed.contains(where: { $0.key == "\(newer.id)@\(newer.version)" }) else { return nil }
            let needs = fetchNeeds(newer)
            let frees = leases[current.key] == nil ? current.bytes : 0
            return (newer, UpdatePlanInfo(asset: newer.id, fromVersion: current.entry.version, toVersion: newer.version,
                                          downloadBytes: needs.download, spaceNeeded: needs.space, frees: frees))
        }
    }
}
