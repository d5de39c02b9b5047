import EarshotSystem
import EarshotWire
import Foundation

/// What garbage collection removed (or would remove, on a dry run).
public struct GCReport: Sendable, Hashable {
    public var dryRun: Bool
    public var removed: [GCRemovalInfo]
    public var expiredReservations: [ReservationInfo]
    public var freedBytes: Int64 { removed.reduce(0) { $0 + $1.bytes } }
    public var summary: String {
        "\(dryRun ? "would remove" : "removed") \(removed.count) asset version(s) (\(freedBytes) bytes), \(expiredReservations.count) expired reservation(s)"
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

    /// Leases the current installed version of the asset serving `module`.
    public func lease(_ module: ModuleConfiguration) async throws -> AssetLease {
        let asset = try resolve(module)
        guard let installed = try await installedVersions(asset.id).first(where: \.current) else {
            throw AssetError.notInstalled("\(module.kind.rawValue) \(module.locale ?? "")".trimmingCharacters(in: .whitespaces))
        }
        let lease = AssetLease(token: UUID(), entry: installed.entry, path: installed.path)
        leases[lease.key, default: 0] += 1
        let now = clock.now()
        try await database.write { db in
            try db.execute("UPDATE installed_assets SET last_used = ?, unneeded_since = NULL WHERE id = ? AND version = ?", [.double(now), .text(installed.entry.id), .int(Int64(installed.entry.version))])
        }
        return lease
    }

    /// Ends a lease; a superseded version nobody holds any more is retired at once.
    public func endLease(_ lease: AssetLease) async {
        let remaining = (leases[lease.key] ?? 1) - 1
        leases[lease.key] = remaining > 0 ? remaining : nil
        guard remaining <= 0, let installed = try? await installedVersions(lease.entry.id),
              let version = installed.first(where: { $0.entry.version == lease.entry.version }), !version.current else { return }
        try? await remove([version])
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
    func reconcile(repair: Bool) async throws {
        let fm = FileManager.default
        if repair, let leftovers = try? fm.contentsOfDirectory(atPath: settings.stagingDirectory) {
            for name in leftovers { try fm.removeItem(atPath: settings.stagingDirectory + "/" + name) }
        }
        let installed = try await installedAssets()
        let known = Set(installed.map(\.path))
        var problems: [String] = []
        for asset in installed where !fm.fileExists(atPath: asset.path) {
            problems.append("\(asset.key) is recorded but \(asset.path) is missing")
            if repair {
                try await database.write { db in
                    try db.execute("DELETE FROM installed_assets WHERE id = ? AND version = ?", [.text(asset.entry.id), .int(Int64(asset.entry.version))])
                }
            }
        }
        let committing = Set(jobs.keys)
        for id in (try? fm.contentsOfDirectory(atPath: settings.assetsDirectory)) ?? [] {
            let dir = settings.assetsDirectory + "/" + id
            // A running job renames its tree into place just before committing the row.
            for version in (try? fm.contentsOfDirectory(atPath: dir)) ?? [] where !known.contains(dir + "/" + version) && !committing.contains("\(id)@\(version)") {
                problems.append("\(dir)/\(version) is not recorded")
                if repair { try fm.removeItem(atPath: dir + "/" + version) }
            }
            if repair, (try? fm.contentsOfDirectory(atPath: dir))?.isEmpty == true { try fm.removeItem(atPath: dir) }
        }
        if repair {
            for problem in problems { log("repaired: \(problem)") }
        } else if !problems.isEmpty {
            throw AssetError.inconsistentState(problems.joined(separator: "; "))
        }
    }

    // MARK: GC

    /// Mark and sweep: expires unused reservations, retires superseded versions nobody leases,
    /// removes assets unneeded for the grace period, and evicts least recently used unneeded assets
    /// while the store exceeds its budget. Refuses to run on inconsistent state.
    public func collectGarbage(dryRun: Bool) async throws -> GCReport {
        try await reconcile(repair: false)
        let now = clock.now()
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
                if !isLeased { removals.append((asset, "superseded")) }
            } else if isLeased || Self.isNeeded(asset.entry, by: live) {
                needed.append(asset)
            } else if let since = asset.unneededSince, now - since >= settings.gcGracePeriod {
                removals.append((asset, "unreserved"))
            } else if asset.unneededSince == nil {
                newlyUnneeded.append(asset)
            }
        }
        if settings.maxStoreSize > 0 {
            let removedKeys = Set(removals.map(\.0.key))
            var total = installed.filter { !removedKeys.contains($0.key) }.reduce(Int64(0)) { $0 + $1.bytes }
            let neededKeys = Set(needed.map(\.key))
            let evictable = installed.filter { !removedKeys.contains($0.key) && !neededKeys.contains($0.key) && !leased.contains($0.key) }
                .sorted { $0.lastUsed < $1.lastUsed }
            for asset in evictable where total > settings.maxStoreSize {
                removals.append((asset, "store budget"))
                total -= asset.bytes
            }
        }
        let report = GCReport(dryRun: dryRun, removed: removals.map { GCRemovalInfo(asset: $0.0.key, bytes: $0.0.bytes, reason: $0.1) }, expiredReservations: expired)
        guard !dryRun else { return report }

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
        return report
    }

    /// Deletes the rows first, then the directories: a crash in between leaves only unrecorded
    /// directories, which the next start removes.
    func remove(_ candidates: [InstalledAsset]) async throws {
        // A session may have leased one since the caller looked.
        let assets = candidates.filter { leases[$0.key] == nil }
        guard !assets.isEmpty else { return }
        try await database.write { db in
            for asset in assets {
                try db.execute("DELETE FROM installed_assets WHERE id = ? AND version = ?", [.text(asset.entry.id), .int(Int64(asset.entry.version))])
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
