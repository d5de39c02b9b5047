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

/// What refreshing one catalog source did.
public struct CatalogRefreshResult: Sendable, Codable, Hashable {
    public enum Outcome: String, Sendable, Codable {
        case updated, unchanged, failed
    }
    public var url: String
    public var outcome: Outcome
    public var version: Int64?
    public var message: String?
}

/// What `update` did.
public struct UpdateReport: Sendable, Codable, Hashable {
    public var catalogs: [CatalogRefreshResult]
    /// `id@old→new` for each asset updated.
    public var updated: [String]
    public var failed: [String]
    /// Whether anything changed (the update timer treats "nothing" as exit status 2).
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
            reloadKeys()
            var results: [CatalogRefreshResult] = []
            for url in settings.catalogURLs {
                results.append(await refresh(url))
            }
            recomputeCatalogAssets()
            return results
        }
    }

    private func refresh(_ url: String) async -> CatalogRefreshResult {
        let stored = catalogs[url]
        do {
            let document = try await downloader.fetch(url: url, etag: stored?.etag, lastModified: stored?.lastModified, maxBytes: Self.maxCatalogBytes, options: settings.download)
            if document.notModified, let stored {
                return CatalogRefreshResult(url: url, outcome: .unchanged, version: stored.catalog.version, message: "not modified")
            }
            let signature = try await downloader.fetch(url: url + ".minisig", etag: nil, lastModified: nil, maxBytes: 64 << 10, options: settings.download)
            let verified = try SignedCatalog.verify(catalogBytes: document.body, signatureText: String(decoding: signature.body, as: UTF8.self),
                                                    trustedKeys: trustedKeys, currentVersion: stored?.catalog.version)
            if let stored, stored.catalog.version == verified.catalog.version {
                // A catalog changes only with a new version; a different body under the same one is refused.
                guard stored.body == document.body else {
                    throw AssetError.verificationFailed("catalog changed without raising its version (\(stored.catalog.version)); keeping the current one")
                }
                return CatalogRefreshResult(url: url, outcome: .unchanged, version: stored.catalog.version, message: nil)
            }
            let record = StoredCatalog(url: url, catalog: verified.catalog, body: document.body, signature: String(decoding: signature.body, as: UTF8.self),
                                       keyID: verified.keyIDHex, etag: document.etag, lastModified: document.lastModified, fetchedAt: clock.wallTime())
            try await database.write { db in
                try db.execute("""
                    INSERT OR REPLACE INTO catalog_sources (url, version, body, signature, key_id, etag, last_modified, fetched_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """, [.text(url), .int(record.catalog.version), .blob(record.body), .text(record.signature), .text(record.keyID),
                          record.etag.map { .text($0) } ?? .null, record.lastModified.map { .text($0) } ?? .null, .double(record.fetchedAt)])
            }
            catalogs[url] = record
            return CatalogRefreshResult(url: url, outcome: .updated, version: record.catalog.version, message: nil)
        } catch {
            log("catalog \(url): \(error); keeping the current one")
            return CatalogRefreshResult(url: url, outcome: .failed, version: stored?.catalog.version, message: "\(error)")
        }
    }

    /// The merged catalog assets and the sources they came from.
    public func catalogSummary() -> (assets: [CatalogAsset], sources: [(url: String, version: Int64?, keyID: String?)]) {
        (catalogAssets, settings.catalogURLs.map { ($0, catalogs[$0]?.catalog.version, catalogs[$0]?.keyID) })
    }

    /// Refreshes catalogs, installs newer versions of installed assets side by side (switching each
    /// atomically when it commits) and retires old versions nobody uses.
    public func update() async -> UpdateReport {
        let refreshed = await refreshCatalogs()
        var updated: [String] = []
        var failed: [String] = []
        let installed = (try? await installedAssets().filter(\.current)) ?? []
        var started: [(InstallJob, Int)] = []
        for asset in installed {
            guard let newer = catalogAssets.filter({ $0.id == asset.entry.id && $0.version > asset.entry.version }).max(by: { $0.version < $1.version }) else { continue }
            started.append((job(for: newer, bandwidthLimit: settings.updateBandwidthLimit, isUpdate: true), asset.entry.version))
        }
        for (job, old) in started {
            do {
                try await job.wait()
                updated.append("\(job.entry.id)@\(old)→\(job.entry.version)")
            } catch {
                failed.append("\(job.entry.id)@\(job.entry.version): \(error)")
            }
        }
        if !updated.isEmpty { _ = try? await collectGarbage(dryRun: false) }
        let changed = !updated.isEmpty || refreshed.contains { $0.outcome == .updated }
        return UpdateReport(catalogs: refreshed, updated: updated, failed: failed, changed: changed)
    }
}
