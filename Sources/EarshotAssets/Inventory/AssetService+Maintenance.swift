import EarshotSystem
import EarshotWire
import Foundation

/// What garbage collection removed (or would remove, on a dry run).
public struct GCReport: Sendable, Hashable {
    public var dryRun: Bool
    /// Asset versions, then orphaned downloads (reason ``orphanedDownloadReason``, asset
    /// `downloads/<name>`).
    public var removed: [GCRemovalInfo]
    public var expiredReservations: [ReservationInfo]
    public var freedBytes: Int64 { removed.reduce(0) { $0 + $1.bytes } }
    /// The reason of a download-cache entry no job or resumable install needs.
    public static let orphanedDownloadReason = "orphaned download"
    /// The asset versions of ``removed``.
    public var removedAssets: [GCRemovalInfo] { removed.filter { $0.reason != Self.orphanedDownloadReason } }
    /// The orphaned downloads of ``removed``.
    public var orphanedDownloads: [GCRemovalInfo] { removed.filter { $0.reason == Self.orphanedDownloadReason } }
    public var summary: String {
        let assets = removedAssets, downloads = orphanedDownloads
        return "\(dryRun ? "would remove" : "removed") \(assets.count) asset version(s) (\(assets.reduce(0) { $0 + $1.bytes }) bytes), "
            + "\(downloads.count) orphaned download(s) (\(downloads.reduce(0) { $0 + $1.bytes }) bytes), \(expiredReservations.count) expired reservation(s)"
    }
}

/// A session's hold on an installed asset version: GC and updates never remove it while held.
public struct AssetLease: Sendable, Hashable {
    public let token: UUID
    public let entry: CatalogAsset
    /// The installed directory.
    public let path: String
    public var key: String { "\(entry.id)@\(entry.version)" }
}

extension AssetService {
    // MARK: Leases

    /// Leases the current installed version of the asset serving `module`. Its use is recorded
    /// without making the session wait for the database (``DeferredUses``: a full state disk does
    /// not stop installed models from serving).
    public func lease(_ module: ModuleConfiguration) async throws -> AssetLease {
        try await exclusively { () async throws -> AssetLease in
            let asset = try resolve(module)
            guard let installed = try await installedVersions(asset.id).first(where: \.current) else {
                throw AssetError.notInstalled("\(module.kind.rawValue) \(module.locale ?? "")".trimmingCharacters(in: .whitespaces))
            }
            let lease = AssetLease(token: UUID(), entry: installed.entry, path: installed.path)
            leases[lease.key, default: 0] += 1
            recordUse(of: installed.entry, at: clock.wallTime())
            return lease
        }
    }

    /// Ends a lease; a superseded version nobody holds any more is retired at once.
    public func endLease(_ lease: AssetLease) async {
        let remaining = (leases[lease.key] ?? 1) - 1
        leases[lease.key] = remaining > 0 ? remaining : nil
        guard remaining <= 0 else { return }
        await exclusively {
            guard let installed = try? await installedVersions(lease.entry.id),
                  let version = installed.first(where: { $0.entry.version == lease.entry.version }),
                  isRetired(version, among: installed, now: clock.wallTime()) else { return }
            try? await remove([version])
        }
    }

    /// Asset keys (`id@version`) currently leased.
    public var leasedAssets: Set<String> { Set(leases.keys) }

    /// Installed assets as admins see them.
    public func installedAssetInfo() async throws -> [InstalledAssetInfo] {
        let reservations = try await reservations(of: nil)
        return try await installedAssets().map { asset in
            InstalledAssetInfo(id: asset.entry.id, version: asset.entry.version, kind: asset.entry.kind, engine: asset.entry.engine,
                               locales: asset.entry.locales, bytes: asset.bytes, path: asset.path, current: asset.current,
                               leased: leases[asset.key] != nil, reserved: Self.isNeeded(asset.entry, by: reservations),
                               installedAt: asset.installedAt, lastUsed: asset.lastUsed, unneededSince: asset.unneededSince)
        }
    }

    /// Install jobs in flight.
    public func jobInfo() -> [InstallJobInfo] {
        jobs.values.map { InstallJobInfo(asset: $0.entry.id, version: $0.entry.version) }.sorted { $0.asset < $1.asset }
    }

    // MARK: Consistency

    /// Compares the database with `state/assets`: rows without a directory, directories without a
    /// row, leftovers in staging. With `repair` it fixes them (at start: a crash leaves exactly
    /// these); without, it throws `inconsistentState` (GC refuses to run then).
    ///
    /// Repair never deletes what it can re-identify: a row whose tree is missing claims the
    /// unrecorded tree at its own `assets/<id>/<version>` when the stored path differs only by the
    /// state directory prefix (a moved state directory) or the tree's content matches the row
    /// (its entry's files, its byte count), else any unrecorded tree whose content matches; the
    /// row is pointed at it. Only what matches no row is removed.
    func reconcile(repair: Bool) async throws {
        if repair {
            let staging = settings.stagingDirectory
            try await BlockingWork.run("earshot.repair") {
                let fm = FileManager.default
                for name in (try? fm.contentsOfDirectory(atPath: staging)) ?? [] { try fm.removeItem(atPath: staging + "/" + name) }
            }
        }
        let recorded = try await recordedInstalls()
        let committing = Set(jobs.keys)
        let assetsDirectory = settings.assetsDirectory
        let scan = await BlockingWork.run("earshot.reconcile") {
            StoreScan.consistency(of: recorded, assetsDirectory: assetsDirectory, committing: committing, reidentify: repair)
        }
        var problems = scan.lost.map { "\($0.key) is recorded but \($0.path) is missing" }
        problems += scan.unrecorded.map { "\($0) is not recorded" }
        guard repair else {
            if !problems.isEmpty { throw AssetError.inconsistentState(problems.joined(separator: "; ")) }
            return
        }
        let reidentified = scan.reidentified
        try await BlockingWork.run("earshot.repair") { try StoreScan.moveIntoPlace(reidentified) }
        let lost = scan.lost
        try await database.write { [settings] db in
            for item in reidentified {
                try db.execute("UPDATE installed_assets SET path = ? WHERE id = ? AND version = ?",
                               [.text(settings.storedPath(item.canonical)), .text(item.asset.entry.id), .int(Int64(item.asset.entry.version))])
            }
            for asset in lost {
                try db.execute("DELETE FROM installed_assets WHERE id = ? AND version = ?", [.text(asset.entry.id), .int(Int64(asset.entry.version))])
            }
        }
        let unrecorded = scan.unrecorded
        try await BlockingWork.run("earshot.repair") { try StoreScan.remove(unrecorded, assetsDirectory: assetsDirectory) }
        for item in reidentified {
            log("repaired: \(item.asset.key) was recorded at \(item.asset.path); re-identified its tree at \(item.found)\(item.found == item.canonical ? "" : ", moved to \(item.canonical)")")
        }
        for problem in problems { log("repaired: \(problem)") }
    }

    /// Every `installed_assets` row with its path as stored.
    func recordedInstalls() async throws -> [RecordedInstall] {
        let stored = try await database.read { db in
            try db.execute("SELECT id, version, path FROM installed_assets").reduce(into: [String: String]()) { paths, row in
                paths["\(row[0].text ?? "")@\(row[1].int ?? 0)"] = row[2].text ?? ""
            }
        }
        return try await installedAssets().map { RecordedInstall(asset: $0, storedPath: stored[$0.key] ?? $0.path) }
    }

    // MARK: Download cache

    /// Removes (or on a dry run only reports) the download-cache entries nothing needs: needed are
    /// the downloads of running jobs, of jobs a previous run left unfinished (`install_jobs`), and
    /// of installs cancelled mid-way (`resumable_downloads`) while their catalog asset is still
    /// listed, not installed, and the cancellation is younger than the GC grace period. Everything
    /// else goes: failed jobs' partials, planted files, half-written sidecars. Runs at start and
    /// with every GC.
    func sweepDownloads(dryRun: Bool) async throws -> [GCRemovalInfo] {
        let now = clock.wallTime()
        let resumable = try await database.read { db in
            try db.execute("SELECT sha256, id, version, since FROM resumable_downloads").map {
                (sha256: $0[0].text ?? "", key: "\($0[1].text ?? "")@\($0[2].int ?? 0)", since: $0[3].double ?? 0)
            }
        }
        let installed = Set(try await installedAssets().map(\.key))
        let pending = try await pendingJobs().map(\.entry.sha256)
        let listed = Set(catalogAssets.map { "\($0.sha256) \($0.id)@\($0.version)" })
        var keeping = Set(pending)
        for download in resumable where now - download.since < settings.gcGracePeriod
            && listed.contains("\(download.sha256) \(download.key)") && !installed.contains(download.key) {
            keeping.insert(download.sha256)
        }
        // Running jobs last, after every await: a job started meanwhile is seen.
        keeping.formUnion(jobs.values.map(\.entry.sha256))
        keeping.formUnion(publishing)
        let directory = settings.downloadsDirectory
        let needed = keeping
        let sweep = await BlockingWork.run("earshot.gc.downloads") {
            StoreScan.sweepDownloads(directory, keeping: needed, dryRun: dryRun)
        }
        if !dryRun {
            let stale = resumable.map(\.sha256).filter { !needed.contains($0) || !sweep.present.contains($0) }
            if !stale.isEmpty {
                try await database.write { db in
                    for sha256 in stale { try db.execute("DELETE FROM resumable_downloads WHERE sha256 = ?", [.text(sha256)]) }
                }
            }
            for orphan in sweep.orphans { log("removed orphaned download \(orphan.name) (\(orphan.bytes) bytes)") }
        }
        return sweep.orphans.map { GCRemovalInfo(asset: "downloads/" + $0.name, bytes: $0.bytes, reason: GCReport.orphanedDownloadReason) }
    }

    // MARK: GC

    /// Mark and sweep: expires unused reservations, retires superseded versions nobody leases,
    /// removes assets unneeded for the grace period, evicts least recently used unneeded assets
    /// while the store exceeds its budget, and sweeps orphaned downloads from the cache
    /// (``sweepDownloads(dryRun:)``). Refuses to run on inconsistent state, and while uses it must
    /// count cannot be written (``DeferredUses``; a dry run writes them too).
    public func collectGarbage(dryRun: Bool) async throws -> GCReport {
        try await exclusively { () async throws -> GCReport in
            try await writeDeferredUses()
            try await reconcile(repair: false)
            let now = clock.wallTime()
            let cutoff = now - settings.reservationExpiry
            let all = try await reservations(of: nil)
            let expired = all.filter { $0.lastUsed < cutoff }
            let live = all.filter { $0.lastUsed >= cutoff }
            let installed = try await installedAssets()
            let leased = leasedAssets

            var removals: [(InstalledAsset, String)] = []
            var newlyUnneeded: [InstalledAsset] = []
            var needed: [InstalledAsset] = []
            for asset in installed {
                let isLeased = leased.contains(asset.key)
                if !asset.current {
                    if !isLeased && isRetired(asset, among: installed, now: now) { removals.append((asset, "superseded")) }
                } else if isLeased || Self.isNeeded(asset.entry, by: live) {
                    needed.append(asset)
                } else if let since = asset.unneededSince, now - since >= settings.gcGracePeriod {
                    removals.append((asset, "unreserved"))
                } else if asset.unneededSince == nil {
                    newlyUnneeded.append(asset)
                }
            }
            // Prepared custom language models no reservation keeps go too; those kept count toward the budget.
            let modelRemovals = try await languageModels.collect(keeping: live, preparedBefore: now - settings.gcGracePeriod, dryRun: dryRun)
            if settings.maxStoreSize > 0 {
                let removedKeys = Set(removals.map(\.0.key))
                let modelBytes = try await languageModels.totalBytes() - (dryRun ? modelRemovals.reduce(0) { $0 + $1.bytes } : 0)
                var total = installed.filter { !removedKeys.contains($0.key) }.reduce(modelBytes) { $0 + $1.bytes }
                let neededKeys = Set(needed.map(\.key))
                let evictable = installed.filter { !removedKeys.contains($0.key) && !neededKeys.contains($0.key) && !leased.contains($0.key) }
                    .sorted { $0.lastUsed < $1.lastUsed }
                for asset in evictable where total > settings.maxStoreSize {
                    removals.append((asset, "store budget"))
                    total -= asset.bytes
                }
            }
            var report = GCReport(dryRun: dryRun, removed: removals.map { GCRemovalInfo(asset: $0.0.key, bytes: $0.0.bytes, reason: $0.1) }, expiredReservations: expired)
            report.removed += modelRemovals
            guard !dryRun else {
                report.removed += try await sweepDownloads(dryRun: true)
                return report
            }

            let removedKeys = Set(removals.map(\.0.key))
            let (marked, cleared) = (newlyUnneeded, needed)
            try await database.write { db in
                for r in expired {
                    try db.execute("DELETE FROM reservations WHERE uid = ? AND app_id = ? AND locale = ?", [.int(Int64(r.uid)), .text(r.appId), .text(r.locale)])
                }
                for asset in marked where !removedKeys.contains(asset.key) {
                    try db.execute("UPDATE installed_assets SET unneeded_since = ? WHERE id = ? AND version = ?", [.double(now), .text(asset.entry.id), .int(Int64(asset.entry.version))])
                }
                for asset in cleared where asset.unneededSince != nil {
                    try db.execute("UPDATE installed_assets SET unneeded_since = NULL WHERE id = ? AND version = ?", [.text(asset.entry.id), .int(Int64(asset.entry.version))])
                }
            }
            try await remove(removals.map(\.0))
            if !expired.isEmpty { try await cancelUnneededJobs() }
            report.removed += try await sweepDownloads(dryRun: false)
            observer?.garbageCollected(freedBytes: report.freedBytes)
            return report
        }
    }

    /// Whether superseded `asset` may go: it is not the newest previous version of its asset
    /// (the rollback target), or its rollback window (``AssetSettings/keepPreviousFor``) is over.
    func isRetired(_ asset: InstalledAsset, among installed: [InstalledAsset], now: Double) -> Bool {
        guard !asset.current else { return false }
        let previous = installed.filter { $0.entry.id == asset.entry.id && !$0.current }.max { $0.entry.version < $1.entry.version }
        guard previous?.key == asset.key, settings.keepPreviousFor > 0 else { return true }
        return now - (asset.unneededSince ?? 0) >= settings.keepPreviousFor
    }

    /// Makes the kept previous version of `assetID` current again, atomically (new sessions get
    /// it; open ones keep theirs); the version it replaces is kept in its place for the window.
    /// Returns `(from, to)`. `notFound` when no previous version is kept, `held` when the asset
    /// is held (the hold pins the current version).
    public func rollback(_ assetID: String, requestedBy: String) async throws -> (from: Int, to: Int) {
        try await exclusively { () async throws -> (from: Int, to: Int) in
            let installed = try await installedVersions(assetID)
            guard let current = installed.first(where: \.current),
                  let previous = installed.filter({ !$0.current && $0.entry.version < current.entry.version }).first else {
                throw AssetError.notFound("a previous version of \(assetID) to roll back to (kept for [Assets] KeepPreviousForSec after an update)")
            }
            if let hold = try await holds()[assetID] { throw AssetError.held(asset: assetID, version: hold.version) }
            let now = clock.wallTime()
            try await database.write { db in
                try db.execute("UPDATE installed_assets SET current = 1, unneeded_since = NULL, last_used = ? WHERE id = ? AND version = ?",
                               [.double(now), .text(assetID), .int(Int64(previous.entry.version))])
                try db.execute("UPDATE installed_assets SET current = 0, unneeded_since = ? WHERE id = ? AND version = ?",
                               [.double(now), .text(assetID), .int(Int64(current.entry.version))])
            }
            log("rolled back \(assetID) \(current.entry.version) → \(previous.entry.version) (by \(requestedBy))", .notice,
                ["asset": assetID, "from_version": "\(current.entry.version)", "to_version": "\(previous.entry.version)", "requested_by": requestedBy])
            return (current.entry.version, previous.entry.version)
        }
    }

    /// Deletes the rows first, then the directories: a crash in between leaves only unrecorded
    /// directories, which the next start removes. Callers hold ``gate``, so no lease can start
    /// between the lease check and the deletion.
    func remove(_ candidates: [InstalledAsset]) async throws {
        // A session may have leased one since the caller looked.
        let assets = candidates.filter { leases[$0.key] == nil }
        guard !assets.isEmpty else { return }
        try await database.write { db in
            for asset in assets {
                try db.execute("DELETE FROM installed_assets WHERE id = ? AND version = ?", [.text(asset.entry.id), .int(Int64(asset.entry.version))])
                // A hold pins an installed version: it goes with it.
                try db.execute("DELETE FROM held_assets WHERE id = ? AND version = ?", [.text(asset.entry.id), .int(Int64(asset.entry.version))])
            }
        }
        let paths = assets.map(\.path)
        await BlockingWork.run("earshot.gc") {
            for path in paths {
                try? FileManager.default.removeItem(atPath: path)
                // Drop `assets/<id>` once its last version is gone.
                let parent = (path as NSString).deletingLastPathComponent
                if (try? FileManager.default.contentsOfDirectory(atPath: parent))?.isEmpty == true { try? FileManager.default.removeItem(atPath: parent) }
            }
        }
        for asset in assets { log("removed \(asset.key) (\(asset.bytes) bytes)") }
    }
}
