import EarshotWire
import Foundation

/// Uses the state database has not recorded yet: a session's lease of an installed version and a
/// client's use of its reservations. Sessions never wait for these writes — with the state disk
/// full, installed models keep serving — and what could not be written is retried by every later
/// lease and use, and before GC, which refuses to run while any is still unwritten, so no
/// reservation expires and no asset is collected for want of them.
struct DeferredUses: Sendable {
    struct Asset: Hashable, Sendable {
        var id: String
        var version: Int
    }

    struct Reservation: Hashable, Sendable {
        var uid: UInt32
        var appID: String
        var locale: String
    }

    /// When each was last used (wall-clock seconds).
    var assets: [Asset: Double] = [:]
    var reservations: [Reservation: Double] = [:]
    /// Whether the current failure to write them has been logged (once until a write succeeds).
    var failureLogged = false
    var isEmpty: Bool { assets.isEmpty && reservations.isEmpty }
}

extension AssetService {
    /// Notes that a session uses `asset` now; the write runs in the background
    /// (``scheduleDeferredWrite()``), so the session never waits for the state disk.
    func recordUse(of asset: CatalogAsset, at now: Double) {
        deferredUses.assets[DeferredUses.Asset(id: asset.id, version: asset.version)] = now
        scheduleDeferredWrite()
    }

    /// Notes that `client` used its reservations of `locales` now (expiry counts from the last use),
    /// as ``recordUse(of:at:)``.
    func recordUse(ofReservations locales: [String], for client: ClientIdentity, at now: Double) {
        let tags = Set(locales.compactMap { catalogLocale(serving: $0) ?? LocaleTag($0)?.description })
        for locale in tags {
            deferredUses.reservations[DeferredUses.Reservation(uid: client.uid, appID: client.appID, locale: locale)] = now
        }
        scheduleDeferredWrite()
    }

    /// Starts writing the pending uses unless a write is under way (it writes what is noted
    /// meanwhile before it ends). A failed write leaves them pending, logged once, for the next
    /// use, GC or shutdown to retry.
    private func scheduleDeferredWrite() {
        guard deferredWrite == nil else { return }
        deferredWrite = Task {
            while !deferredUses.isEmpty, await writeDeferredUsesLogging() {}
            deferredWrite = nil
        }
    }

    /// Waits for a background write of uses under way, so what is read next includes them.
    func settleDeferredUses() async {
        await deferredWrite?.value
    }

    /// Writes the pending uses; false (logged once) when the database refuses.
    private func writeDeferredUsesLogging() async -> Bool {
        do {
            try await writeDeferredUses()
            return true
        } catch {
            guard !deferredUses.failureLogged else { return false }
            deferredUses.failureLogged = true
            log("recording asset and reservation use failed (\(error)); sessions go on, the write is retried later and GC waits for it", .warning,
                ["reason": "\(error)"])
            return false
        }
    }

    /// Writes what is pending before the service stops (a failure is logged, as for any write).
    func flushDeferredUses() async {
        await settleDeferredUses()
        _ = await writeDeferredUsesLogging()
    }

    /// Writes every pending use in one transaction (only ever moving `last_used` forward); throws
    /// when the database refuses (a full disk), keeping them pending.
    func writeDeferredUses() async throws {
        guard !deferredUses.isEmpty else { return }
        let pending = deferredUses
        try await database.write { db in
            for (asset, at) in pending.assets {
                try db.execute("UPDATE installed_assets SET last_used = max(last_used, ?), unneeded_since = NULL WHERE id = ? AND version = ?",
                               [.double(at), .text(asset.id), .int(Int64(asset.version))])
            }
            for (r, at) in pending.reservations {
                try db.execute("UPDATE reservations SET last_used = max(last_used, ?) WHERE uid = ? AND app_id = ? AND locale = ?",
                               [.double(at), .int(Int64(r.uid)), .text(r.appID), .text(r.locale)])
            }
        }
        // Uses noted while the write ran stay pending.
        for (asset, at) in pending.assets where deferredUses.assets[asset] == at { deferredUses.assets[asset] = nil }
        for (r, at) in pending.reservations where deferredUses.reservations[r] == at { deferredUses.reservations[r] = nil }
        if deferredUses.failureLogged {
            deferredUses.failureLogged = false
            log("recorded the asset and reservation use deferred by a failed write")
        }
    }
}
