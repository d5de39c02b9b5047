@testable import EarshotAssets
import EarshotWire
import Foundation
import Testing
import TestSupport

/// Resolution of module configurations to catalog assets, BCP-47 equivalence and status, against
/// the standard catalog (see ``InventoryFixture/publishStandardCatalog(version:)``).
@Suite("Inventory: resolution and status")
struct InventoryResolutionTests {
    @Test("module configurations resolve to the asset that serves them best")
    func resolvesModules() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        try await fixture.withService(running: false) { handle async throws in
            let service = handle.service
            func resolved(_ module: ModuleConfiguration) async throws -> String { try await service.resolve(module).id }

            #expect(try await resolved(Modules.transcriber("en-US")) == "tx-en")
            #expect(try await resolved(Modules.transcriber("en-GB")) == "tx-en")
            // A progressive preset or volatile results prefer the streaming asset.
            #expect(try await resolved(Modules.transcriber("en-US", preset: "progressiveTranscription")) == "tx-en-live")
            #expect(try await resolved(ModuleConfiguration(kind: .transcriber, locale: "en_US", reportingOptions: ["volatileResults"])) == "tx-en-live")
            // Only tx-en serves en-GB, streaming or not.
            #expect(try await resolved(Modules.transcriber("en-GB", preset: "progressiveTranscription")) == "tx-en")
            // Content hints must be supported.
            #expect(try await resolved(Modules.transcriber("de-DE", hints: ["farField"])) == "tx-de")
            #expect(try await resolved(Modules.transcriber("de-DE")) == "tx-de")
            #expect(try await resolved(Modules.dictation("fr-FR")) == "dict-fr")
            #expect(try await resolved(Modules.detector) == "vad")

            let noHint = await #expect(throws: AssetError.self) { try await service.resolve(Modules.transcriber("en-US", hints: ["farField"])) }
            #expect(noHint?.caseName == "unsupportedModule")
            // The kind matters: no transcriber serves French, no dictation serves English.
            let wrongKind = await #expect(throws: AssetError.self) { try await service.resolve(Modules.transcriber("fr")) }
            #expect(wrongKind?.caseName == "unsupportedLocale")
            let unknown = await #expect(throws: AssetError.self) { try await service.resolve(Modules.dictation("en-US")) }
            #expect(unknown?.caseName == "unsupportedLocale")
            let garbage = await #expect(throws: AssetError.self) { try await service.resolve(Modules.transcriber("??")) }
            #expect(garbage?.caseName == "unsupportedLocale")
        }
    }

    @Test("BCP-47 equivalence: underscores, case and extensions; region falls back to a language-only tag")
    func localeEquivalence() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        try await fixture.withService(running: false) { handle async throws in
            let service = handle.service
            for spelling in ["en_US", "en-us", "EN-US", "en-US-u-ca-gregory", "en_US.UTF-8", "en-Latn-US"] {
                #expect(await service.equivalentLocale(spelling, kind: .transcriber) == "en-US", "\(spelling)")
            }
            #expect(await service.equivalentLocale("en_GB", kind: .transcriber) == "en-GB")
            // The catalog's language-only `fr` serves every French region.
            for spelling in ["fr", "fr-CA", "fr_FR", "fr-CH-u-nu-latn"] {
                #expect(await service.equivalentLocale(spelling, kind: .dictation) == "fr", "\(spelling)")
            }
            // A region the catalog does not list is not served by another region.
            #expect(await service.equivalentLocale("de-AT", kind: .transcriber) == nil)
            #expect(await service.equivalentLocale("en-AU", kind: .transcriber) == nil)
            // Per kind; garbage is nil, not a crash.
            #expect(await service.equivalentLocale("fr", kind: .transcriber) == nil)
            #expect(await service.equivalentLocale("en-US", kind: .detector) == nil)
            #expect(await service.equivalentLocale("", kind: .transcriber) == nil)
            #expect(await service.equivalentLocale("1234", kind: .transcriber) == nil)

            // Equivalent spellings resolve and report status alike.
            let (_, each) = try await service.status(of: ["en_US", "en-us", "en-US-u-ca-gregory"].map { Modules.transcriber($0) })
            #expect(each == [.supported, .supported, .supported])
        }
    }

    @Test("supported and installed locales per kind, canonical and sorted")
    func localesPerKind() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        try await fixture.withService { handle async throws in
            let service = handle.service
            #expect(try await service.locales(kind: .transcriber, installedOnly: false) == ["de-DE", "en-GB", "en-US"])
            #expect(try await service.locales(kind: .dictation, installedOnly: false) == ["fr"])
            #expect(try await service.locales(kind: .detector, installedOnly: false) == [])
            #expect(try await service.locales(kind: .transcriber, installedOnly: true) == [])

            _ = try await service.install([Modules.transcriber("en-GB")], for: appA) { _ in }
            #expect(try await service.locales(kind: .transcriber, installedOnly: true) == ["en-GB", "en-US"])
            #expect(try await service.locales(kind: .dictation, installedOnly: true) == [])
        }
    }

    /// Aggregate status: unsupported, then downloading, then supported, else installed — whatever
    /// the order of the modules. A job is "downloading" from the moment it is queued: before
    /// `run()` runs, it stays there.
    @Test("status of modules and its aggregate: unsupported > downloading > supported > installed")
    func statusAggregate() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        try await fixture.withService(running: false) { handle async throws in
            let service = handle.service
            let unsupported = Modules.transcriber("ja-JP")
            let english = Modules.transcriber("en-US")
            let french = Modules.dictation("fr-CA")
            let detector = Modules.detector

            var (aggregate, each) = try await service.status(of: [unsupported, english, french, detector])
            #expect(each == [.unsupported, .supported, .supported, .supported])
            #expect(aggregate == .unsupported)
            #expect(try await service.status(of: []).0 == .installed)

            // Queue the detector and the English transcriber (no run loop yet: they stay queued).
            let waiting = Task { try await service.install([detector, english], for: appA) { _ in } }
            #expect(await eventually { await service.jobInfo().count == 2 })
            (aggregate, each) = try await service.status(of: [english, french, detector, unsupported])
            #expect(each == [.downloading, .supported, .downloading, .unsupported])
            #expect(aggregate == .unsupported)
            #expect(try await service.status(of: [french, english]).0 == .downloading)
            #expect(try await service.status(of: [english, french]).0 == .downloading)
            #expect(try await service.status(of: [french]).0 == .supported)

            handle.startRunning()
            let outcome = try await waiting.value
            #expect(Set(outcome.installed) == ["vad@1", "tx-en@1"])
            (aggregate, each) = try await service.status(of: [detector, english, french])
            #expect(each == [.installed, .installed, .supported])
            #expect(aggregate == .supported)
            #expect(try await service.status(of: [english, unsupported]).0 == .unsupported)
            #expect(try await service.status(of: [english, Modules.transcriber("en-GB"), detector]).0 == .installed)
            // A different configuration served by the same installed asset is installed too.
            #expect(try await service.status(of: [Modules.transcriber("en_GB")]).1 == [.installed])
        }
    }
}
