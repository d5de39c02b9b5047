import EarshotWire
import Foundation

extension AssetService {
    /// The reservation quota of `appID` (`maximumReservedLocales`).
    public func maximumReservedLocales(appID: String) -> Int {
        settings.appQuotas[appID] ?? settings.maxReservedLocales
    }

    /// Reserves `locale` for `client`; returns whether a reservation was created (false: it existed).
    /// An unsupported locale is `unsupportedLocale`; a full quota is `quotaExceeded`.
    public func reserve(_ locale: String, for client: ClientIdentity) async throws -> Bool {
        try await reserve([locale], for: client).count == 1
    }

    /// Reserves every locale of `locales` for `client` in one transaction (all or none); returns the
    /// ones newly created. When all exist already only their use is recorded, without waiting for
    /// the database (``DeferredUses``: a full state disk does not stop installed models serving).
    func reserve(_ locales: [String], for client: ClientIdentity) async throws -> [String] {
        var canonical: [String] = []
        for locale in locales {
            guard let match = catalogLocale(serving: locale) else { throw AssetError.unsupportedLocale(locale) }
            if !canonical.contains(match) { canonical.append(match) }
        }
        let now = clock.wallTime()
        let held = Set(try await reservations(of: client).map(\.locale))
        if canonical.allSatisfy(held.contains) {
            recordUse(ofReservations: canonical, for: client, at: now)
            return []
        }
        let maximum = maximumReservedLocales(appID: client.appID)
        let (perUser, appsPerUser) = (settings.maxReservedLocalesPerUser, settings.maxAppsPerUser)
        let wanted = canonical
        return try await database.write { db in
            let existing = Set(try db.execute("SELECT locale FROM reservations WHERE uid = ? AND app_id = ?", [.int(Int64(client.uid)), .text(client.appID)]).compactMap { $0[0].text })
            let new = wanted.filter { !existing.contains($0) }
            guard existing.count + new.count <= maximum else { throw AssetError.quotaExceeded(maximum: maximum, wanted: new) }
            // The same user's other app ids count too: rotating app ids must not multiply the quota.
            if !new.isEmpty {
                let rows = try db.execute("SELECT app_id, locale FROM reservations WHERE uid = ?", [.int(Int64(client.uid))])
                let userLocales = Set(rows.compactMap { $0[1].text })
                let apps = Set(rows.compactMap { $0[0].text })
                let addedLocales = new.filter { !userLocales.contains($0) }
                guard userLocales.count + addedLocales.count <= perUser else {
                    throw AssetError.userQuotaExceeded("reserving \(addedLocales.joined(separator: ", ")) would exceed the maximum of \(perUser) distinct locales one user may reserve across all its apps; release one first")
                }
                guard apps.contains(client.appID) || apps.count < appsPerUser else {
                    throw AssetError.userQuotaExceeded("uid \(client.uid) already holds reservations for \(apps.count) app ids, the most one user may; release those of an app it no longer uses")
                }
            }
            for locale in wanted {
                try db.execute("""
                    INSERT INTO reservations (uid, app_id, locale, created, last_used) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (uid, app_id, locale) DO UPDATE SET last_used = excluded.last_used
                    """, [.int(Int64(client.uid)), .text(client.appID), .text(locale), .double(now), .double(now)])
            }
            return new
        }
    }

    /// Releases `client`'s reservation of `locale`; returns whether one was removed. Install jobs no
    /// remaining reservation needs are cancelled (their partial downloads stay for a later resume).
    public func release(_ locale: String, for client: ClientIdentity) async throws -> Bool {
        // Stored under the catalog locale serving it (`fr` for `fr-CA`), as `reserve` does.
        let spellings = Set([catalogLocale(serving: locale), LocaleTag(locale)?.description ?? locale].compactMap { $0 })
        let removed = try await database.write { db in
            var removed = false
            for canonical in spellings {
                try db.execute("DELETE FROM reservations WHERE uid = ? AND app_id = ? AND locale = ?", [.int(Int64(client.uid)), .text(client.appID), .text(canonical)])
                removed = removed || db.changes > 0
            }
            return removed
        }
        if removed { try await cancelUnneededJobs() }
        return removed
    }

    /// Reservations of `client`, or everyone's when `client` is nil.
    public func reservations(of client: ClientIdentity?) async throws -> [ReservationInfo] {
        await settleDeferredUses()
        return try await database.read { db in
            let rows = if let client {
                try db.execute("SELECT uid, app_id, locale, created, last_used FROM reservations WHERE uid = ? AND app_id = ? ORDER BY locale", [.int(Int64(client.uid)), .text(client.appID)])
            } else {
                try db.execute("SELECT uid, app_id, locale, created, last_used FROM reservations ORDER BY uid, app_id, locale")
            }
            return rows.map { ReservationInfo(uid: UInt32($0[0].int ?? 0), appId: $0[1].text ?? "", locale: $0[2].text ?? "", created: $0[3].double ?? 0, lastUsed: $0[4].double ?? 0) }
        }
    }

    /// The catalog locale a reservation of `locale` is stored under: the best match among every
    /// catalog locale (`fr` for `fr-CA` when the catalog lists `fr`), or nil when none serves it.
    func catalogLocale(serving locale: String) -> String? {
        guard let tag = LocaleTag(locale) else { return nil }
        let supported = Set(catalogAssets.flatMap(\.locales).compactMap(LocaleTag.init)).sorted { $0.description < $1.description }
        return LocaleTag.bestMatch(for: tag, in: supported)?.description
    }

    /// Whether any reservation needs `asset`: one for a locale it serves, or — for a
    /// language-independent asset — any reservation at all.
    static func isNeeded(_ asset: CatalogAsset, by reservations: [ReservationInfo]) -> Bool {
        let served = asset.locales.compactMap(LocaleTag.init)
        if served.isEmpty { return !reservations.isEmpty }
        return reservations.contains { reservation in
            guard let tag = LocaleTag(reservation.locale) else { return false }
            return served.contains { $0.serves(tag) || $0 == tag }
        }
    }
}

extension AssetService {
    /// A session of `client` uses `modules`: their reservations count as used now (expiry). Never
    /// waits for or fails on the database (``DeferredUses``).
    public func noteUse(of modules: [ModuleConfiguration], by client: ClientIdentity) {
        recordUse(ofReservations: modules.compactMap(\.locale), for: client, at: clock.wallTime())
    }
}
