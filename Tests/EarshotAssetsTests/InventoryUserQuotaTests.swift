@testable import EarshotAssets
import EarshotWire
import Foundation
import Testing
import TestSupport

/// Reservation caps per user (uid) across app ids.
@Suite("Inventory: per-user reservation caps")
struct InventoryUserQuotaTests {
    /// Issue 8, defect 13: rotating app ids bypassed the reservation quota (each new app id got a
    /// fresh MaxReservedLocales).
    @Test func rotatingAppIDsDoesNotBypassTheReservationQuota() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await InventoryMultilingualTests.publishMultilingualCatalog(fixture)
        var settings = fixture.settings(maxReservedLocales: 1)
        settings.maxReservedLocalesPerUser = 3
        settings.maxAppsPerUser = 4
        try await fixture.withService(settings, running: false) { handle async throws in
            let service = handle.service
            let locales = ["de", "fr", "es", "jv", "en"]
            // One locale per app id, as the app quota allows: the user's third distinct locale is
            // the last one.
            for (index, locale) in locales.prefix(3).enumerated() {
                #expect(try await service.reserve(locale, for: ClientIdentity(uid: 1000, appID: "app\(index)")))
            }
            let fourth = await #expect(throws: AssetError.self) { try await service.reserve("jv", for: ClientIdentity(uid: 1000, appID: "app3")) }
            #expect(fourth?.caseName == "userQuotaExceeded")
            #expect(try await service.reservations(of: nil).count == 3)
            // A locale the user already holds costs nothing more, up to the app-id cap.
            #expect(try await service.reserve("de", for: ClientIdentity(uid: 1000, appID: "app3")))
            let fifthApp = await #expect(throws: AssetError.self) { try await service.reserve("de", for: ClientIdentity(uid: 1000, appID: "app4")) }
            #expect(fifthApp?.caseName == "userQuotaExceeded")
            // Another user has caps of its own.
            #expect(try await service.reserve("jv", for: ClientIdentity(uid: 2000, appID: "app0")))
            // Releasing frees room again.
            #expect(try await service.release("es", for: ClientIdentity(uid: 1000, appID: "app2")))
            #expect(try await service.reserve("jv", for: ClientIdentity(uid: 1000, appID: "app2")))
        }
    }
}
