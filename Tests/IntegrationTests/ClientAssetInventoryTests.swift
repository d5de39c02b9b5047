import Earshot
import EarshotWire
import Foundation
import Testing
import TestSupport

/// The Apple-shaped client API against the real daemon and the embedded default catalog that
/// `Scripts/setup.sh` builds (PocketSphinx en-US dictation, Silero VAD).
@Suite(.serialized) struct ClientAssetInventoryTests {
    static let embeddedCatalog = "/usr/local/share/earshot/catalog/catalog.json"

    /// A daemon on the embedded catalog, with the shared client pointed at it.
    static func daemon(config: String = "") async throws -> TestDaemon {
        try #require(FileManager.default.fileExists(atPath: embeddedCatalog), "run Scripts/setup.sh first: it builds the embedded catalog")
        let daemon = try await TestDaemon(config: config)
        await EarshotService.shared.configure(appID: "com.example.tests.\(UUID().uuidString.prefix(8))", socket: daemon.socket)
        return daemon
    }

    @Test func installFlowFollowsApplesContract() async throws {
        let daemon = try await Self.daemon()
        defer { Task { await daemon.cleanUp() } }
        let dictation = DictationTranscriber(locale: Locale(identifier: "en_US"), preset: .longDictation)

        #expect(await DictationTranscriber.supportedLocales.map(\.identifier).contains("en-US"))
        #expect(await DictationTranscriber.installedLocales.isEmpty)
        #expect(await DictationTranscriber.supportedLocale(equivalentTo: Locale(identifier: "en-US-u-ca-gregory"))?.identifier == "en-US")
        #expect(await DictationTranscriber.supportedLocale(equivalentTo: Locale(identifier: "de_DE")) == nil)
        #expect(await AssetInventory.status(forModules: [dictation]) == .supported)

        let request = try #require(try await AssetInventory.assetInstallationRequest(supporting: [dictation]))
        try await request.downloadAndInstall()
        #expect(request.progress.isFinished)
        #expect(request.progress.totalUnitCount > 1_000_000)

        #expect(await AssetInventory.status(forModules: [dictation]) == .installed)
        #expect(try await AssetInventory.assetInstallationRequest(supporting: [dictation]) == nil)
        #expect(await DictationTranscriber.installedLocales.map(\.identifier) == ["en-US"])
        // Installing auto-reserved the locale for this app.
        #expect(await AssetInventory.reservedLocales.map(\.identifier) == ["en-US"])
        #expect(AssetInventory.maximumReservedLocales == 3)
    }

    @Test func unsupportedLocaleThrowsAndStatusSaysSo() async throws {
        let daemon = try await Self.daemon()
        defer { Task { await daemon.cleanUp() } }
        let klingon = DictationTranscriber(locale: Locale(identifier: "tlh"), preset: .phrase)
        #expect(await AssetInventory.status(forModules: [klingon]) == .unsupported)
        await #expect {
            try await AssetInventory.assetInstallationRequest(supporting: [klingon])
        } throws: { ($0 as? EarshotError)?.code == .unsupportedLocale }
        await #expect {
            try await AssetInventory.reserve(locale: Locale(identifier: "tlh"))
        } throws: { ($0 as? EarshotError)?.code == .unsupportedLocale }
    }

    @Test func reserveAndReleaseReportWhetherTheyChangedAnything() async throws {
        let daemon = try await Self.daemon()
        defer { Task { await daemon.cleanUp() } }
        let locale = Locale(identifier: "en_US")
        #expect(try await AssetInventory.reserve(locale: locale))
        #expect(!(try await AssetInventory.reserve(locale: locale)))
        #expect(await AssetInventory.reservedLocales.map(\.identifier) == ["en-US"])
        #expect(await AssetInventory.release(reservedLocale: locale))
        #expect(await !AssetInventory.release(reservedLocale: locale))
        #expect(await AssetInventory.reservedLocales.isEmpty)
    }

    @Test func installBeyondTheQuotaThrowsQuotaExceeded() async throws {
        let daemon = try await Self.daemon(config: "[Assets]\nMaxReservedLocales=0\n")
        defer { Task { await daemon.cleanUp() } }
        let dictation = DictationTranscriber(locale: Locale(identifier: "en-US"), preset: .shortDictation)
        let request = try #require(try await AssetInventory.assetInstallationRequest(supporting: [dictation]))
        await #expect { try await request.downloadAndInstall() } throws: { ($0 as? EarshotError)?.code == .quotaExceeded }
        #expect(await AssetInventory.status(forModules: [dictation]) == .supported)
        #expect(AssetInventory.maximumReservedLocales == 0)
    }

    @Test func detectorNeedsNoLocale() async throws {
        let daemon = try await Self.daemon()
        defer { Task { await daemon.cleanUp() } }
        let detector = SpeechDetector(detectionOptions: .init(sensitivityLevel: .high), reportResults: true)
        #expect(detector.moduleConfiguration.sensitivity == "high")
        #expect(await AssetInventory.status(forModules: [detector]) == .supported)
        let request = try #require(try await AssetInventory.assetInstallationRequest(supporting: [detector]))
        try await request.downloadAndInstall()
        #expect(await AssetInventory.status(forModules: [detector]) == .installed)
    }

    @Test func presetsCarryApplesOptionMatrix() {
        let locale = Locale(identifier: "en-US")
        let progressive = SpeechTranscriber(locale: locale, preset: .timeIndexedProgressiveTranscription).moduleConfiguration
        #expect(progressive.preset == "timeIndexedProgressiveTranscription")
        #expect(progressive.reportingOptions == ["fastResults", "volatileResults"])
        #expect(progressive.attributeOptions == ["audioTimeRange"])
        let phrase = DictationTranscriber(locale: locale, preset: .phrase).moduleConfiguration
        #expect(phrase.contentHints == ["shortForm"])
        #expect(phrase.transcriptionOptions.isEmpty)
        let long = DictationTranscriber.Preset.progressiveLongDictation
        let custom = DictationTranscriber(locale: locale, contentHints: long.contentHints.union([.farField]), transcriptionOptions: long.transcriptionOptions,
                                          reportingOptions: long.reportingOptions, attributeOptions: long.attributeOptions.union([.audioTimeRange])).moduleConfiguration
        #expect(custom.preset == nil)
        #expect(custom.contentHints == ["farField"])
        #expect(custom.reportingOptions == ["volatileResults"])
        #expect(custom.attributeOptions == ["audioTimeRange"])
    }
}
