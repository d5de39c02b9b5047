import EarshotWire
import Foundation

/// An asset pinned at its installed version: updates skip it until it is released.
public struct AssetHold: Sendable, Hashable {
    public var id: String
    public var version: Int
    public var since: Double
    /// `timer` or `uid N`.
    public var heldBy: String
}

extension AssetService {
    // MARK: Holds

    /// Pins `assetID` at its current installed version: updates (the timer's and manual ones)
    /// skip it and rollback refuses it until ``unhold(_:requestedBy:)``. Returns the version and
    /// whether it was newly held. `notFound` when no version is installed.
    public func hold(_ assetID: String, requestedBy: String) async throws -> (version: Int, changed: Bool) {
        try await exclusively { () async throws -> (version: Int, changed: Bool) in
            guard let current = try await installedVersions(assetID).first(where: \.current) else {
                throw AssetError.notFound("an installed version of \(assetID) to hold")
            }
            if let existing = try await holds()[assetID], existing.version == current.entry.version { return (existing.version, false) }
            let now = clock.wallTime()
            try await database.write { db in
                try db.execute("INSERT OR REPLACE INTO held_assets (id, version, since, held_by) VALUES (?, ?, ?, ?)",
                               [.text(assetID), .int(Int64(current.entry.version)), .double(now), .text(requestedBy)])
            }
            log("held \(assetID) at version \(current.entry.version) (by \(requestedBy))", .notice,
                ["asset": assetID, "to_version": "\(current.entry.version)", "requested_by": requestedBy])
            return (current.entry.version, true)
        }
    }

    /// Releases the pin on `assetID`; the next update may install a newer version. Returns the
    /// version that was held, nil when it was not held.
    public func unhold(_ assetID: String, requestedBy: String) async throws -> Int? {
        try await exclusively { () async throws -> Int? in
            guard let existing = try await holds()[assetID] else { return nil }
            try await database.write { db in try db.execute("DELETE FROM held_assets WHERE id = ?", [.text(assetID)]) }
            log("released the hold on \(assetID) at version \(existing.version) (by \(requestedBy))", .notice,
                ["asset": assetID, "from_version": "\(existing.version)", "requested_by": requestedBy])
            return existing.version
        }
    }

    /// Every hold by asset id.
    public func holds() async throws -> [String: AssetHold] {
        try await database.read { db in
            try db.execute("SELECT id, version, since, held_by FROM held_assets").reduce(into: [String: AssetHold]()) { holds, row in
                let id = row[0].text ?? ""
                holds[id] = AssetHold(id: id, version: Int(row[1].int ?? 0), since: row[2].double ?? 0, heldBy: row[3].text ?? "")
            }
        }
    }

    // MARK: Visibility

    /// Every installed asset's installed, newest available, held and previous (rollback) version.
    public func versionSummary() async throws -> [AssetVersionsInfo] {
        let installed = try await installedAssets()
        let held = try await holds()
        return Set(installed.map(\.entry.id)).sorted().map { id in
            let versions = installed.filter { $0.entry.id == id }
            let current = versions.first(where: \.current)
            let previous = versions.filter { !$0.current && $0.entry.version < (current?.entry.version ?? .max) }.max { $0.entry.version < $1.entry.version }
            let keptUntil = previous.flatMap { p in settings.keepPreviousFor > 0 ? p.unneededSince.map { $0 + settings.keepPreviousFor } : nil }
            return AssetVersionsInfo(id: id, installed: current?.entry.version, available: catalogAssets.filter { $0.id == id }.map(\.version).max(),
                                     held: held[id]?.version, previous: previous?.entry.version, previousKeptUntil: keptUntil)
        }
    }

    /// The last real update run, if any.
    public func lastUpdate() async throws -> UpdateRunInfo? {
        try await database.read { db in
            try db.execute("SELECT finished_at, requested_by, outcome, summary FROM update_runs WHERE slot = 1").first.map {
                UpdateRunInfo(finishedAt: $0[0].double ?? 0, requestedBy: $0[1].text ?? "", outcome: $0[2].text ?? "", summary: $0[3].text ?? "")
            }
        }
    }

    /// Records `report` as the last update run (a failure to is logged: the run's own outcome is
    /// what its caller needs).
    func recordUpdateRun(_ report: UpdateReport, requestedBy: String) async {
        let outcome = !report.failed.isEmpty || report.catalogs.contains { $0.outcome == .failed } ? "failed" : report.changed ? "changed" : "unchanged"
        var parts = report.updated.map { "updated \($0)" } + report.failed.map { "failed \($0)" } + report.deferred.map { "deferred \($0)" }
        parts += report.held.map { "held \($0.asset) at \($0.fromVersion) (\($0.toVersion) available)" }
        parts += report.catalogs.filter { $0.outcome == .unreachable || $0.outcome == .failed }.map { "catalog \($0.url) \($0.outcome.rawValue)" }
        let summary = parts.isEmpty ? "nothing newer" : parts.joined(separator: "; ")
        let now = clock.wallTime()
        do {
            try await database.write { db in
                try db.execute("INSERT OR REPLACE INTO update_runs (slot, finished_at, requested_by, outcome, summary) VALUES (1, ?, ?, ?, ?)",
                               [.double(now), .text(requestedBy), .text(outcome), .text(summary)])
            }
        } catch {
            log("recording the update run failed: \(error)", .warning, ["reason": "\(error)", "requested_by": requestedBy])
        }
    }
}
