import EarshotAssets
import EarshotWire
import Foundation
import Testing
import TestSupport

/// Per-(uid, app) locale reservations: created/released flags, quotas (all or none), per-app
/// overrides, unsupported locales, and who sees what.
@Suite("Inventory: reservations and quotas")
struct InventoryReservationTests {
    @Test("reserve reports created true then false; release reports true then false; spellings are one locale")
    func reserveAndRelease() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        try await fixture.withService(running: false) { handle async throws in
            let service = handle.service
            #expect(try await service.reserve("en-US", for: appA))
            #expect(try await !service.reserve("en-US", for: appA))
            #expect(try await !service.reserve("en_us", for: appA))
            #expect(try await !service.reserve("en-US-u-ca-gregory", for: appA))
            #expect(try await service.reservations(of: appA).map(\.locale) == ["en-US"])

            #expect(try await service.release("en_US", for: appA))
            #expect(try await !service.release("en-US", for: appA))
            #expect(try await service.reservations(of: appA).isEmpty)
            // Releasing what was never reserved, or an unknown locale, is simply false.
            #expect(try await !service.release("de-DE", for: appA))
            #expect(try await !service.release("xx-YY", for: appA))
        }
    }

    /// A locale the catalog serves through a language-only tag (`fr` serves `fr-CA`) is reserved,
    /// used and released with the spelling the client used.
    @Test("a region served by a language-only catalog locale is released and renewed with the same spelling")
    func regionFallbackRoundTrip() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        try await fixture.withService { handle async throws in
            let service = handle.service
            #expect(try await service.reserve("fr-CA", for: appA))
            #expect(try await !service.reserve("fr_FR", for: appA), "fr-FR is served by the same reservation")
            #expect(try await service.reservations(of: appA).map(\.locale) == ["fr"])
            #expect(try await service.release("fr-CA", for: appA))
            #expect(try await service.reservations(of: appA).isEmpty)
            #expect(try await !service.release("fr-CA", for: appA))

            // Using an installed module with another regional spelling renews the reservation.
            _ = try await service.install([Modules.dictation("fr-CA")], for: appA) { _ in }
            fixture.clock.advance(100)
            let again = try await service.install([Modules.dictation("fr-CH")], for: appA) { _ in }
            #expect(again.nothingToDo)
            #expect(try await service.reservations(of: appA).map(\.lastUsed) == [fixture.clock.wallTime()])
            #expect(try await service.release("fr_BE", for: appA))
        }
    }

    @Test("exceeding the quota is quotaExceeded and reserves nothing, even for installs needing two locales")
    func quotaIsAllOrNone() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        try await fixture.withService(fixture.settings(maxReservedLocales: 2)) { handle async throws in
            let service = handle.service
            #expect(await service.maximumReservedLocales(appID: appA.appID) == 2)
            #expect(try await service.reserve("en-US", for: appA))

            // An install needing en-GB and de-DE would make three.
            let modules = [Modules.transcriber("en-GB"), Modules.transcriber("de-DE", hints: ["farField"])]
            let error = await #expect(throws: AssetError.self) { try await service.install(modules, for: appA) { _ in } }
            #expect(error?.caseName == "quotaExceeded")
            if case .quotaExceeded(let maximum, let wanted) = error {
                #expect(maximum == 2)
                #expect(wanted == ["en-GB", "de-DE"])
            }
            #expect(try await service.reservations(of: appA).map(\.locale) == ["en-US"])
            #expect(await service.jobInfo().isEmpty, "no job starts when the quota refuses")
            #expect(try await service.installedAssets().isEmpty)
            #expect(fixture.entries(fixture.assetsDirectory).isEmpty)

            // Within the quota it works; one more is refused; a locale already held is fine.
            #expect(try await service.reserve("de-DE", for: appA))
            let third = await #expect(throws: AssetError.self) { try await service.reserve("fr", for: appA) }
            #expect(third?.caseName == "quotaExceeded")
            #expect(try await !service.reserve("de_DE", for: appA))
            #expect(try await service.reservations(of: appA).map(\.locale) == ["de-DE", "en-US"])

            // The quota is per (uid, app): another app of the same user has its own.
            #expect(try await service.reserve("fr", for: appB))
            #expect(try await service.reserve("en-GB", for: appB))
        }
    }

    @Test("per-app quota overrides")
    func appQuotaOverride() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        let settings = fixture.settings(maxReservedLocales: 1, appQuotas: [appB.appID: 4])
        try await fixture.withService(settings, running: false) { handle async throws in
            let service = handle.service
            #expect(await service.maximumReservedLocales(appID: appA.appID) == 1)
            #expect(await service.maximumReservedLocales(appID: appB.appID) == 4)
            #expect(await service.maximumReservedLocales(appID: "unknown.app") == 1)
            for locale in ["en-US", "en-GB", "de-DE", "fr"] {
                #expect(try await service.reserve(locale, for: appB), "\(locale)")
            }
            #expect(try await service.reserve("en-US", for: appA))
            let full = await #expect(throws: AssetError.self) { try await service.reserve("fr", for: appA) }
            #expect(full?.caseName == "quotaExceeded")
            // The override is by app id, whoever runs it.
            let sameAppOtherUser = ClientIdentity(uid: 4242, appID: appB.appID)
            for locale in ["en-US", "en-GB", "de-DE", "fr"] {
                #expect(try await service.reserve(locale, for: sameAppOtherUser))
            }
        }
    }

    @Test("reserving an unsupported locale is unsupportedLocale and reserves nothing")
    func unsupportedLocale() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        try await fixture.withService(running: false) { handle async throws in
            let service = handle.service
            for locale in ["ja-JP", "de-AT", "not a locale", ""] {
                let error = await #expect(throws: AssetError.self) { try await service.reserve(locale, for: appA) }
                #expect(error?.caseName == "unsupportedLocale", "\(locale)")
            }
            let install = await #expect(throws: AssetError.self) { try await service.install([Modules.transcriber("ja-JP")], for: appA) { _ in } }
            #expect(install?.caseName == "unsupportedLocale")
            #expect(try await service.reservations(of: nil).isEmpty)
        }
    }

    @Test("clients see and release only their own reservations; nil lists everyone's")
    func visibility() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        try await fixture.withService(running: false) { handle async throws in
            let service = handle.service
            let start = fixture.clock.wallTime()
            #expect(try await service.reserve("en-US", for: appA))
            fixture.clock.advance(5)
            #expect(try await service.reserve("fr", for: appA))
            #expect(try await service.reserve("en-US", for: appB))
            #expect(try await service.reserve("de-DE", for: otherUser))

            let mine = try await service.reservations(of: appA)
            #expect(mine.map(\.locale) == ["en-US", "fr"])
            #expect(mine.allSatisfy { $0.uid == appA.uid && $0.appId == appA.appID })
            #expect(mine.map(\.created) == [start, start + 5])
            #expect(try await service.reservations(of: appB).map(\.locale) == ["en-US"])
            #expect(try await service.reservations(of: otherUser).map(\.locale) == ["de-DE"])

            let all = try await service.reservations(of: nil)
            #expect(all.map { "\($0.uid)/\($0.appId)/\($0.locale)" } == [
                "1000/org.example.a/en-US", "1000/org.example.a/fr", "1000/org.example.b/en-US", "1001/org.example.a/de-DE",
            ])

            // Another client cannot release them: false, and they stay.
            #expect(try await !service.release("fr", for: appB))
            #expect(try await !service.release("de-DE", for: appA))
            #expect(try await service.reservations(of: nil).count == 4)
            #expect(try await service.release("en-US", for: appB))
            #expect(try await service.reservations(of: appA).map(\.locale) == ["en-US", "fr"])
            #expect(try await service.reservations(of: nil).count == 3)
        }
    }
}
