@testable import EarshotAssets
import EarshotWire
import Foundation
import Testing
import TestSupport

/// Updates from a re-signed catalog: side-by-side install, atomic switch, old versions retired once
/// no lease holds them, "nothing changed", and rollback refusal.
@Suite("Inventory: updates")
struct InventoryUpdateTests {
    static let v1Encoder = StandardFiles.bytes(90_000, seed: 40)
    static let v2Encoder = StandardFiles.bytes(95_000, seed: 41)

    /// Publishes catalog `catalogVersion` with `tx-en` at `assetVersion` (its encoder `encoder`).
    func publish(_ fixture: InventoryFixture, catalogVersion: Int64, assetVersion: Int, encoder: [UInt8]) async throws {
        let archive = try await fixture.tarGz("tx-en-v\(assetVersion)", ["encoder.onnx": encoder])
        let entry = try fixture.asset("tx-en", version: assetVersion, locales: ["en-US"], path: archive, files: ["encoder": "encoder.onnx"])
        try await fixture.publish(version: catalogVersion, [entry])
    }

    @Test("update installs v2 side by side and switches; a leased v1 stays until its lease ends; then nothing changes")
    func updateWithLease() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await publish(fixture, catalogVersion: 1, assetVersion: 1, encoder: Self.v1Encoder)
        try await fixture.withService { handle async throws in
            let service = handle.service
            let english = Modules.transcriber("en-US")
            _ = try await service.install([english], for: appA) { _ in }
            let old = try await service.lease(english)
            #expect(old.key == "tx-en@1")
            let v1 = fixture.assetsDirectory + "/tx-en/1"
            let v2 = fixture.assetsDirectory + "/tx-en/2"

            try await publish(fixture, catalogVersion: 2, assetVersion: 2, encoder: Self.v2Encoder)
            let report = await service.update(requestedBy: "test")
            #expect(report.catalogs.map(\.outcome) == [.updated])
            #expect(report.catalogs.first?.version == 2)
            #expect(report.updated == ["tx-en@1→2"])
            #expect(report.failed.isEmpty)
            #expect(report.changed)

            // Side by side; v2 is current; the leased v1 is still on disk and recorded.
            let installed = try await service.installedAssets()
            #expect(installed.map { "\($0.key) current=\($0.current)" } == ["tx-en@1 current=false", "tx-en@2 current=true"])
            #expect(fixture.contents(v1 + "/encoder.onnx") == Self.v1Encoder)
            #expect(fixture.contents(v2 + "/encoder.onnx") == Self.v2Encoder)
            #expect(try await service.status(of: [english]).1 == [.installed])
            let fresh = try await service.lease(english)
            #expect(fresh.key == "tx-en@2" && fresh.path == v2, "new sessions get the new version")
            #expect(await service.leasedAssets == ["tx-en@1", "tx-en@2"])
            #expect(try await service.collectGarbage(dryRun: false).removed.isEmpty, "GC keeps the leased superseded version")
            #expect(fixture.exists(v1))

            // The last lease on v1 ends: it is retired at once.
            await service.endLease(old)
            #expect(!fixture.exists(v1))
            #expect(try await service.installedAssets().map(\.key) == ["tx-en@2"])
            await service.endLease(fresh)
            #expect(fixture.exists(v2), "the current version stays when its lease ends")

            // Nothing new: changed is false (the update timer's exit status 2).
            let again = await service.update(requestedBy: "test")
            #expect(again.catalogs.map(\.outcome) == [.unchanged])
            #expect(again.updated.isEmpty && again.failed.isEmpty)
            #expect(!again.changed)
            // Re-signing the same document changes nothing either.
            try await fixture.tool.sign(fixture.catalogPath, with: fixture.keys, in: fixture.directory)
            #expect(await !service.update(requestedBy: "test").changed)
        }
    }

    @Test("without a lease, update retires the old version right away; the switch survives a restart")
    func updateWithoutLease() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await publish(fixture, catalogVersion: 1, assetVersion: 1, encoder: Self.v1Encoder)
        try await fixture.withService { handle async throws in
            let service = handle.service
            _ = try await service.install([Modules.transcriber("en-US")], for: appA) { _ in }
            try await publish(fixture, catalogVersion: 5, assetVersion: 2, encoder: Self.v2Encoder)
            let report = await service.update(requestedBy: "test")
            #expect(report.updated == ["tx-en@1→2"] && report.changed)
            #expect(try await service.installedAssets().map(\.key) == ["tx-en@2"])
            #expect(fixture.entries(fixture.assetsDirectory + "/tx-en") == ["2"])
        }
        try await fixture.withService { handle async throws in
            let service = handle.service
            #expect(try await service.installedAssets().map { "\($0.key) current=\($0.current)" } == ["tx-en@2 current=true"])
            #expect(try await service.lease(Modules.transcriber("en-US")).key == "tx-en@2")
            #expect(await service.catalogSummary().sources.first?.version == 5)
        }
    }

    /// A per-user daemon has no update timer: before UpdateIntervalSec its installed assets stayed
    /// at the version first installed, whatever the catalog offered later.
    @Test("with an update interval the service updates at start and then every interval of its clock, by schedule")
    func scheduledUpdatesFollowTheInjectedClock() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await publish(fixture, catalogVersion: 1, assetVersion: 1, encoder: Self.v1Encoder)
        var settings = fixture.settings()
        settings.updateInterval = 86400
        try await fixture.withService(settings) { handle async throws in
            let service = handle.service
            // The first run at start (nothing installed yet), then a sleep of one interval beside GC's.
            #expect(try await eventually { try await service.lastUpdate()?.requestedBy == "schedule" })
            #expect(try await service.lastUpdate()?.outcome == "unchanged")
            await fixture.clock.sleepers(atLeast: 2)
            #expect(fixture.clock.requestedSleeps.sorted() == [.seconds(3600), .seconds(86400)])

            _ = try await service.install([Modules.transcriber("en-US")], for: appA) { _ in }
            try await publish(fixture, catalogVersion: 2, assetVersion: 2, encoder: Self.v2Encoder)
            fixture.clock.advance(by: .seconds(86399))
            await fixture.clock.sleepers(atLeast: 2)
            #expect(try await service.installedAssets().map(\.key) == ["tx-en@1"], "nothing before the interval is up")

            fixture.clock.advance(by: .seconds(1))
            // The run is recorded last (after the switch and GC): wait for the record, not the switch
            // (CI failed once reading the record between the two).
            #expect(try await eventually { try await service.lastUpdate()?.outcome == "changed" })
            #expect(try await service.installedAssets().map(\.key) == ["tx-en@2"], "updated, and v1 (no lease) retired")
            let run = try await service.lastUpdate()
            #expect(run?.requestedBy == "schedule" && run?.summary == "updated tx-en@1→2")
            #expect(fixture.logs.all.contains { $0.message == "updated tx-en 1 → 2 (by schedule)" })
            await fixture.clock.sleepers(atLeast: 2)
            #expect(fixture.clock.requestedSleeps.filter { $0 == .seconds(86400) }.count == 2, "and sleeps for the next interval")
        }
    }

    @Test("a validly signed catalog with a lower version is refused and the current one kept")
    func rollbackIsRefused() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await publish(fixture, catalogVersion: 7, assetVersion: 2, encoder: Self.v2Encoder)
        try await fixture.withService { handle async throws in
            let service = handle.service
            #expect(await service.catalogSummary().assets.map { "\($0.id)@\($0.version)" } == ["tx-en@2"])

            // An older catalog, even one offering a "newer" asset version, is not accepted.
            try await publish(fixture, catalogVersion: 6, assetVersion: 3, encoder: Self.v1Encoder)
            let refreshed = await service.refreshCatalogs()
            #expect(refreshed.map(\.outcome) == [.failed])
            #expect(refreshed.first?.version == 7)
            #expect(refreshed.first?.message?.contains("older than the current version 7") == true, "\(String(describing: refreshed.first?.message))")
            // Regression (issue 9, defect 10): the warning said what is kept twice ("keeping the
            // current catalog; keeping version 7").
            let warning = try #require(fixture.logs.all.last { $0.priority == .warning })
            #expect(warning.message.components(separatedBy: "keeping").count == 2, "\(warning.message)")
            let summary = await service.catalogSummary()
            #expect(summary.assets.map { "\($0.id)@\($0.version)" } == ["tx-en@2"])
            #expect(summary.sources.map(\.version) == [7])

            let report = await service.update(requestedBy: "test")
            #expect(report.catalogs.map(\.outcome) == [.failed])
            #expect(!report.changed && report.updated.isEmpty)
        }
        // The refusal is remembered across restarts: the stored catalog is still version 7.
        let service = try AssetService(settings: fixture.settings(), clock: fixture.clock)
        try await service.start()
        #expect(await service.catalogSummary().sources.map(\.version) == [7])
        #expect(await service.refreshCatalogs().map(\.outcome) == [.failed])
        await service.shutdown()
    }
}
