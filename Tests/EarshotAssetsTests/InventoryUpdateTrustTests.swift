@testable import EarshotAssets
import EarshotWire
import Foundation
import Testing
import TestSupport

/// Issue 9: updates an admin can trust unattended — a dry run that changes nothing, unreachable
/// sources told apart from refusals, warnings with structured fields, space checked before the
/// first byte, and a bad download not fetched again until the catalog changes.
@Suite("Inventory: trustworthy updates")
struct InventoryUpdateTrustTests {
    /// Publishes catalog `catalogVersion` with `tx-en` at `assetVersion`, served by `server`
    /// (`sha256`: what the catalog claims, default the real one).
    func publish(_ fixture: InventoryFixture, server: NginxServer, catalogVersion: Int64, assetVersion: Int, seed: UInt64,
                 sha256: String? = nil, installedSize: Int64? = nil) async throws -> CatalogAsset {
        let archive = try await fixture.tarGz("tx-en-v\(assetVersion)-\(seed)", ["encoder.onnx": StandardFiles.bytes(90_000, seed: seed)])
        let url = try server.put("assets/tx-en-\(assetVersion)-\(seed).tar.gz", try #require(fixture.contents(archive)))
        var entry = try fixture.asset("tx-en", version: assetVersion, locales: ["en-US"], path: archive, files: ["encoder": "encoder.onnx"], urls: [url], sha256: sha256)
        if let installedSize { entry.installedSize = installedSize }
        try await fixture.publish(version: catalogVersion, [entry])
        return entry
    }

    /// Issue 9, defect 1: `update --dry-run` performed the real update.
    @Test("a dry run fetches and verifies the catalog, lists from → to with bytes and space, and changes nothing")
    func updateDryRunChangesNothing() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        let server = try await NginxServer.start()
        _ = try await publish(fixture, server: server, catalogVersion: 1, assetVersion: 1, seed: 50)
        try await fixture.withService { handle async throws in
            let service = handle.service
            _ = try await service.install([Modules.transcriber("en-US")], for: appA) { _ in }
            let v1 = try #require(try await service.installedAssets().first)
            let v2 = try await publish(fixture, server: server, catalogVersion: 2, assetVersion: 2, seed: 51)
            let fetchesBefore = server.accessLog().filter { $0.path.hasSuffix(".tar.gz") }.count

            let dry = await service.update(dryRun: true, requestedBy: "test")
            #expect(dry.dryRun && dry.changed)
            #expect(dry.catalogs.map(\.outcome) == [.updated] && dry.catalogs.first?.version == 2)
            #expect(dry.planned == [UpdatePlanInfo(asset: "tx-en", fromVersion: 1, toVersion: 2, downloadBytes: v2.size,
                                                   spaceNeeded: v2.size + v2.installedSize, frees: v1.bytes)])
            #expect(dry.updated.isEmpty && dry.failed.isEmpty)

            // Nothing changed: the stored catalog, the installed versions, the download cache.
            #expect(await service.catalogSummary().sources.map(\.version) == [1])
            #expect(await service.catalogSummary().assets.map(\.version) == [1])
            #expect(try await service.installedAssets().map(\.key) == ["tx-en@1"])
            #expect(await service.jobInfo().isEmpty)
            #expect(fixture.entries(fixture.downloadsDirectory).isEmpty)
            #expect(server.accessLog().filter { $0.path.hasSuffix(".tar.gz") }.count == fetchesBefore, "no asset byte was fetched")

            // The real update then does what the dry run said.
            let real = await service.update(requestedBy: "uid 0")
            #expect(real.updated == ["tx-en@1→2"] && !real.dryRun)
            #expect(fixture.logs.all.contains { $0.priority == .notice && $0.message == "updated tx-en 1 → 2 (by uid 0)"
                && $0.fields["from_version"] == "1" && $0.fields["to_version"] == "2" && $0.fields["asset"] == "tx-en" })
        }
    }

    /// Issue 9, defects 2, 3 and 5: an unreachable server failed the unit like a bad signature,
    /// was logged at info, and read "stalled (3 attempts)".
    @Test("an unreachable source is 'unreachable' with curl's reason, logged as a warning with its fields")
    func unreachableSourceIsAWarningWithCurlsReason() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        var settings = fixture.settings()
        settings.download.maxAttemptsPerMirror = 1
        let offline = "http://127.0.0.1:1/catalog.json"
        settings.catalogURLs = [fixture.catalogURL, offline]
        try await fixture.withService(settings) { handle async throws in
            let report = await handle.service.update(requestedBy: "test")
            let result = try #require(report.catalogs.first { $0.url == offline })
            #expect(result.outcome == .unreachable)
            let message = try #require(result.message)
            #expect(message.contains("curl error 7: Failed to connect to 127.0.0.1 port 1"), "curl's own reason: \(message)")
            #expect(!message.contains("stalled"))
            #expect(!report.changed && report.failed.isEmpty)
            let warning = try #require(fixture.logs.warnings.first { $0.fields["source"] == offline })
            #expect(warning.fields["reason"] == message)
            #expect(warning.message.contains("unreachable"))
        }
    }

    /// Issue 9, defect 7: space was checked after the download (28.8 MB fetched that could never
    /// be extracted).
    @Test("space is checked before the first byte: an asset that cannot fit is refused and nothing is fetched")
    func spaceIsCheckedBeforeTheFirstByte() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        let server = try await NginxServer.start()
        _ = try await publish(fixture, server: server, catalogVersion: 1, assetVersion: 1, seed: 52, installedSize: 1 << 60)
        try await fixture.withService { handle async throws in
            let error = await #expect(throws: AssetError.self) {
                try await handle.service.install([Modules.transcriber("en-US")], for: appA) { _ in }
            }
            #expect(error?.caseName == "insufficientStorage", "\(String(describing: error))")
            #expect(server.accessLog().filter { $0.path.hasSuffix(".tar.gz") }.isEmpty, "no byte was fetched")
            #expect(fixture.entries(fixture.downloadsDirectory).isEmpty)
            #expect(fixture.logs.warnings.contains { $0.fields["asset"] == "tx-en" && $0.fields["reason"]?.contains("not enough free space") == true })
        }
    }

    /// Issue 9, defect 7: a catalog entry with a wrong hash was fully re-downloaded on every run.
    @Test("a download failing its hash is deleted and not fetched again until the catalog changes")
    func badHashIsNotFetchedAgainUntilTheCatalogChanges() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        let server = try await NginxServer.start()
        _ = try await publish(fixture, server: server, catalogVersion: 1, assetVersion: 1, seed: 53)
        try await fixture.withService { handle async throws in
            let service = handle.service
            _ = try await service.install([Modules.transcriber("en-US")], for: appA) { _ in }
            let wrong = String(repeating: "0", count: 64)
            let bad = try await publish(fixture, server: server, catalogVersion: 2, assetVersion: 2, seed: 54, sha256: wrong)
            let path = try #require(URL(string: bad.urls[0])).path

            let first = await service.update(requestedBy: "test")
            #expect(first.failed.count == 1 && first.failed[0].contains("does not match"), "\(first.failed)")
            #expect(first.deferred.isEmpty)
            #expect(fixture.entries(fixture.downloadsDirectory).isEmpty, "the bad download is deleted")
            #expect(await server.accessLog(atLeast: 1).filter { $0.path == path }.count == 1, "\(server.accessLog().map(\.path)) \(path)")

            let second = await service.update(requestedBy: "test")
            #expect(second.failed.count == 1 && second.failed[0].contains("not downloaded again"), "\(second.failed)")
            #expect(server.accessLog().filter { $0.path == path }.count == 1, "the same bytes are not fetched twice")
            #expect(try await service.installedAssets().map(\.key) == ["tx-en@1"], "v1 stays")

            // A new catalog (the publisher fixed the entry) is tried again.
            _ = try await publish(fixture, server: server, catalogVersion: 3, assetVersion: 2, seed: 54)
            let third = await service.update(requestedBy: "test")
            #expect(third.updated == ["tx-en@1→2"] && third.failed.isEmpty, "\(third)")
        }
    }

    /// Issue 9, defect 9: a dictation asset whose engine needs a detector the catalog does not
    /// list reported "supported" and installed, then failed at transcribe time.
    @Test("a module whose detector dependency no catalog lists is unsupported, with the reason")
    func missingDependencyIsUnsupportedAtStatusTime() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        let assets = try await fixture.standardAssets()
        var dictation = try #require(assets.first { $0.id == "dict-fr" })
        dictation.engine = "pocketsphinx"
        try await fixture.publish(version: 1, [dictation])
        try await fixture.withService { handle async throws in
            let service = handle.service
            #expect(try await service.status(of: [Modules.dictation("fr")]).1 == [.unsupported])
            let error = await #expect(throws: AssetError.self) { try await service.install([Modules.dictation("fr")], for: appA) { _ in } }
            #expect(error?.description.contains("needs a voice activity detector asset, and no catalog lists one") == true, "\(String(describing: error))")
            #expect(try await service.installedAssets().isEmpty, "nothing installed that could never run")
            #expect(try await service.reservations(of: appA).isEmpty)
        }
        // With the detector listed, the same module is supported and installs both.
        try await fixture.publish(version: 2, [dictation, try #require(assets.first { $0.id == "vad" })])
        try await fixture.withService { handle async throws in
            #expect(try await handle.service.status(of: [Modules.dictation("fr")]).1 == [.supported])
        }
    }

    /// Issue 9, defect 6: the previous version was deleted as soon as nothing used it.
    @Test("the replaced version is kept for KeepPreviousFor; rollback switches back; the window then ends")
    func rollbackWindowKeepsThePreviousVersion() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        let server = try await NginxServer.start()
        _ = try await publish(fixture, server: server, catalogVersion: 1, assetVersion: 1, seed: 55)
        var settings = fixture.settings()
        settings.keepPreviousFor = 100
        try await fixture.withService(settings) { handle async throws in
            let service = handle.service
            let english = Modules.transcriber("en-US")
            _ = try await service.install([english], for: appA) { _ in }
            let refused = await #expect(throws: AssetError.self) { try await service.rollback("tx-en", requestedBy: "test") }
            #expect(refused?.caseName == "notFound")
            _ = try await publish(fixture, server: server, catalogVersion: 2, assetVersion: 2, seed: 56)
            #expect(await service.update(requestedBy: "test").updated == ["tx-en@1→2"])
            #expect(try await service.installedAssets().map { "\($0.key) current=\($0.current)" } == ["tx-en@1 current=false", "tx-en@2 current=true"])

            fixture.clock.advance(50)
            #expect(try await service.collectGarbage(dryRun: false).removed.isEmpty, "inside the window")
            let (from, to) = try await service.rollback("tx-en", requestedBy: "uid 0")
            #expect(from == 2 && to == 1)
            let lease = try await service.lease(english)
            #expect(lease.key == "tx-en@1" && fixture.exists(lease.path + "/encoder.onnx"))
            await service.endLease(lease)
            #expect(await service.update(requestedBy: "test").planned.isEmpty, "the version rolled back from is not installed again")
            #expect(fixture.logs.all.contains { $0.priority == .notice && $0.message == "rolled back tx-en 2 → 1 (by uid 0)" })

            fixture.clock.advance(99)
            #expect(try await service.collectGarbage(dryRun: false).removed.isEmpty)
            fixture.clock.advance(1)
            #expect(try await service.collectGarbage(dryRun: false).removed.map(\.asset) == ["tx-en@2"], "the window is over")
            #expect(try await service.installedAssets().map(\.key) == ["tx-en@1"])
        }
    }

    /// Issue 9, defect 6 (no pin): `hold` pins the installed version — updates skip it (the dry run
    /// lists it as held), rollback refuses it — until `unhold`; the hold is stored and survives a
    /// restart, and is logged with who asked.
    @Test("a held asset is skipped by updates and refused by rollback until unhold")
    func holdPinsTheInstalledVersion() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        let server = try await NginxServer.start()
        _ = try await publish(fixture, server: server, catalogVersion: 1, assetVersion: 1, seed: 57)
        var settings = fixture.settings()
        settings.keepPreviousFor = 100
        try await fixture.withService(settings) { handle async throws in
            let service = handle.service
            _ = try await service.install([Modules.transcriber("en-US")], for: appA) { _ in }
            let notInstalled = await #expect(throws: AssetError.self) { try await service.hold("tx-de", requestedBy: "uid 0") }
            #expect(notInstalled?.caseName == "notFound")
            #expect(try await service.hold("tx-en", requestedBy: "uid 0") == (1, true))
            #expect(try await service.hold("tx-en", requestedBy: "uid 0") == (1, false))
            #expect(fixture.logs.all.filter { $0.message == "held tx-en at version 1 (by uid 0)" }.count == 1)
        }
        // Stored: a restarted service still skips it.
        try await fixture.withService(settings) { handle async throws in
            let service = handle.service
            _ = try await publish(fixture, server: server, catalogVersion: 2, assetVersion: 2, seed: 58)
            let dry = await service.update(dryRun: true, requestedBy: "test")
            #expect(dry.planned.isEmpty && dry.held.map(\.toVersion) == [2])
            let real = await service.update(requestedBy: "timer")
            #expect(real.updated.isEmpty && real.held.map { "\($0.asset) \($0.fromVersion)→\($0.toVersion)" } == ["tx-en 1→2"])
            #expect(try await service.installedAssets().map(\.key) == ["tx-en@1"])
            #expect(try await service.lastUpdate()?.summary == "held tx-en at 1 (2 available)")
            #expect(try await service.versionSummary() == [AssetVersionsInfo(id: "tx-en", installed: 1, available: 2, held: 1, previous: nil, previousKeptUntil: nil)])

            #expect(try await service.unhold("tx-en", requestedBy: "uid 0") == 1)
            #expect(try await service.unhold("tx-en", requestedBy: "uid 0") == nil)
            #expect(await service.update(requestedBy: "timer").updated == ["tx-en@1→2"])
            #expect(fixture.logs.all.filter { $0.message == "updated tx-en 1 → 2 (by timer)" }.count == 1)

            // Held at 2: rollback to the kept 1 is refused until unhold.
            _ = try await service.hold("tx-en", requestedBy: "uid 0")
            let refused = await #expect(throws: AssetError.self) { try await service.rollback("tx-en", requestedBy: "uid 0") }
            #expect(refused?.caseName == "held")
            let summary = try #require(try await service.versionSummary().first)
            #expect(summary.installed == 2 && summary.held == 2 && summary.previous == 1 && summary.previousKeptUntil == fixture.clock.wallTime() + 100)
            _ = try await service.unhold("tx-en", requestedBy: "uid 0")
            #expect(try await service.rollback("tx-en", requestedBy: "uid 0") == (2, 1))
        }
    }
}
