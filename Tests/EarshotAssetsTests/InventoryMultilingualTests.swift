@testable import EarshotAssets
import EarshotWire
import Foundation
import Testing
import TestSupport

/// Multilingual assets: one asset serving many locales (and `und`), the catalog's preference
/// between assets for the same locale, and per-locale reservations sharing one installed copy.
@Suite("Inventory: multilingual assets")
struct InventoryMultilingualTests {
    /// The embedded catalog's shape: a multilingual transcriber (`ml`, rank 20, translation, `und`),
    /// an English-only one (`en-only`, rank 10, preferred for progressive presets), a detector.
    static func publishMultilingualCatalog(_ fixture: InventoryFixture, version: Int64 = 1) async throws {
        let ml = try fixture.asset("ml", locales: ["en", "de", "fr", "es", "jv", "und"],
                                   path: try await fixture.tarGz("ml", ["model.onnx": StandardFiles.bytes(100_000, seed: 11)]),
                                   files: ["model": "model.onnx"], capabilities: AssetCapabilities(timeRanges: true, translation: true))
        var mlRanked = ml
        mlRanked.rank = 20
        var enOnly = try fixture.asset("en-only", locales: ["en-US", "en"],
                                       path: try await fixture.tarGz("en-only", ["model.onnx": StandardFiles.bytes(100_000, seed: 12)]),
                                       files: ["model": "model.onnx"], capabilities: AssetCapabilities(timeRanges: true))
        enOnly.rank = 10
        enOnly.preferredPresets = ["progressiveTranscription"]
        let vad = try fixture.asset("vad", kind: .detector, locales: [], path: try fixture.plainFile("vad.download", StandardFiles.vad),
                                    format: .file, files: ["model": "vad.onnx"])
        try await fixture.publish(version: version, [mlRanked, enOnly, vad])
    }

    @Test("rank, preferred presets, und and translate choose between assets serving one locale")
    func catalogPreferenceChoosesTheAsset() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await Self.publishMultilingualCatalog(fixture)
        try await fixture.withService(running: false) { handle async throws in
            let service = handle.service
            func resolved(_ module: ModuleConfiguration) async throws -> String { try await service.resolve(module).id }
            // The higher rank wins even where the other asset names the exact region.
            #expect(try await resolved(Modules.transcriber("en-US")) == "ml")
            #expect(try await resolved(Modules.transcriber("en")) == "ml")
            // The preset the catalog prefers the English-only asset for.
            #expect(try await resolved(Modules.transcriber("en-US", preset: "progressiveTranscription")) == "en-only")
            #expect(try await resolved(Modules.transcriber("de-AT", preset: "progressiveTranscription")) == "ml")
            // Identification and translation.
            #expect(try await resolved(Modules.transcriber("und")) == "ml")
            var translate = Modules.transcriber("en-US", preset: "progressiveTranscription")
            translate.transcriptionOptions = [ModuleConfiguration.translateOption]
            #expect(try await resolved(translate) == "ml", "only ml translates")
            #expect(try await resolved(Modules.transcriber("jv")) == "ml")
            let none = await #expect(throws: AssetError.self) { try await service.resolve(Modules.transcriber("tlh")) }
            #expect(none?.caseName == "unsupportedLocale")
            #expect(try await service.locales(kind: .transcriber, installedOnly: false) == ["de", "en", "en-US", "es", "fr", "jv", "und"])
        }
    }

    @Test("a de and an fr reservation share one installed copy; releasing both lets GC remove it")
    func twoLocalesShareOneInstalledAsset() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await Self.publishMultilingualCatalog(fixture)
        try await fixture.withService(fixture.settings(maxReservedLocales: 2, gcGracePeriod: 10)) { handle async throws in
            let service = handle.service
            _ = try await service.install([Modules.transcriber("de")], for: appA) { _ in }
            let second = try await service.install([Modules.transcriber("fr-CA")], for: appA) { _ in }
            #expect(second.nothingToDo, "the asset serving fr is already installed")
            #expect(try await service.reservations(of: appA).map(\.locale) == ["de", "fr"])
            let installed = try await service.installedAssets().map(\.key)
            #expect(installed.filter { $0.hasPrefix("ml@") } == ["ml@1"], "one copy on disk: \(installed)")
            #expect(fixture.entries(fixture.assetsDirectory) == ["ml"])

            // The quota counts locales, not assets.
            let full = await #expect(throws: AssetError.self) { try await service.reserve("es", for: appA) }
            #expect(full?.caseName == "quotaExceeded")

            // Releasing one keeps the asset; releasing both lets GC remove it after the grace period.
            #expect(try await service.release("de", for: appA))
            fixture.clock.advance(20)
            #expect(try await service.collectGarbage(dryRun: false).removed.isEmpty)
            #expect(try await service.release("fr", for: appA))
            _ = try await service.collectGarbage(dryRun: false)
            fixture.clock.advance(20)
            let report = try await service.collectGarbage(dryRun: false)
            #expect(report.removed.map(\.asset).contains("ml@1"), "\(report.removed)")
            #expect(!fixture.exists(fixture.assetsDirectory + "/ml/1"))
        }
    }

    @Test("a module asking for translation from an asset that cannot translate is unsupported, not silently untranslated")
    func translationNeedsAnAssetThatTranslates() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        try await fixture.withService(running: false) { handle async throws in
            var module = Modules.transcriber("en-US")
            module.transcriptionOptions = [ModuleConfiguration.translateOption]
            let error = await #expect(throws: AssetError.self) { try await handle.service.resolve(module) }
            #expect(error?.caseName == "unsupportedModule")
            #expect(try await handle.service.status(of: [module]).0 == .unsupported)
        }
    }
}
