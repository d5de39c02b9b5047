@testable import EarshotAssets
import EarshotLanguageModel
import EarshotWire
import Foundation
import Testing
import TestSupport

/// Leases, garbage collection and consistency, with the injected clock: grace period, reservation
/// expiry, leases, the store budget (LRU), refusal on inconsistent state, repair at start.
@Suite("Inventory: leases and garbage collection")
struct InventoryGCTests {
    @Test("an unreserved asset survives the grace period, then GC removes it; a dry run only reports")
    func gracePeriod() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        try await fixture.withService(fixture.settings(gcGracePeriod: 100)) { handle async throws in
            let service = handle.service
            let clock = fixture.clock
            let dir = fixture.assetsDirectory + "/tx-en/1"
            _ = try await service.install([Modules.transcriber("en-US")], for: appA) { _ in }

            // Reserved: kept, never marked.
            var report = try await service.collectGarbage(dryRun: false)
            #expect(report.removed.isEmpty && report.expiredReservations.isEmpty)
            #expect(try await service.installedAssets().first?.unneededSince == nil)

            // Unreserved at t0: marked, kept through the grace period.
            #expect(try await service.release("en-US", for: appA))
            let t0 = clock.wallTime()
            report = try await service.collectGarbage(dryRun: false)
            #expect(report.removed.isEmpty)
            #expect(try await service.installedAssets().first?.unneededSince == t0)
            #expect(try await service.installedAssetInfo().first?.reserved == false)

            // Needed again meanwhile (another client, another spelling): the mark is cleared...
            clock.advance(50)
            #expect(try await service.reserve("en_GB", for: appB))
            report = try await service.collectGarbage(dryRun: false)
            #expect(report.removed.isEmpty)
            #expect(try await service.installedAssets().first?.unneededSince == nil)
            // ...and set anew when released.
            #expect(try await service.release("en-GB", for: appB))
            let t1 = clock.wallTime()
            _ = try await service.collectGarbage(dryRun: false)
            #expect(try await service.installedAssets().first?.unneededSince == t1)

            clock.advance(99.5)
            report = try await service.collectGarbage(dryRun: false)
            #expect(report.removed.isEmpty, "\(report.removed)")
            #expect(fixture.exists(dir))

            clock.advance(0.5)
            let expected = [GCRemovalInfo(asset: "tx-en@1", bytes: 100_000, reason: "unreserved")]
            report = try await service.collectGarbage(dryRun: true)
            #expect(report.dryRun)
            #expect(report.removed == expected)
            #expect(report.freedBytes == 100_000)
            #expect(report.summary.hasPrefix("would remove 1 asset version(s) (100000 bytes)"))
            #expect(fixture.exists(dir), "a dry run removes nothing")
            #expect(try await service.installedAssets().count == 1)

            report = try await service.collectGarbage(dryRun: false)
            #expect(!report.dryRun)
            #expect(report.removed == expected)
            #expect(!fixture.exists(dir))
            #expect(try await service.installedAssets().isEmpty)
            #expect(try await service.status(of: [Modules.transcriber("en-US")]).0 == .supported)
            // Nothing left to do, and the store is still consistent.
            #expect(try await service.collectGarbage(dryRun: false).removed.isEmpty)
        }
    }

    @Test("reservations unused for ReservationExpiry expire; use renews them")
    func reservationExpiry() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        try await fixture.withService(fixture.settings(reservationExpiry: 1000, gcGracePeriod: 100)) { handle async throws in
            let service = handle.service
            let clock = fixture.clock
            _ = try await service.install([Modules.transcriber("en-US")], for: appA) { _ in }
            #expect(try await service.reserve("de-DE", for: appB))
            #expect(try await service.reserve("fr", for: otherUser))

            clock.advance(600)
            // Reserving again and installing both count as use.
            #expect(try await !service.reserve("de-DE", for: appB))
            let touched = try await service.install([Modules.dictation("fr-BE")], for: otherUser) { _ in }
            #expect(!touched.nothingToDo)
            #expect(try await service.reservations(of: otherUser).first?.lastUsed == clock.wallTime())

            clock.advance(400)
            #expect(try await service.collectGarbage(dryRun: false).expiredReservations.isEmpty, "exactly ReservationExpiry is not yet expired")

            clock.advance(1)
            let dry = try await service.collectGarbage(dryRun: true)
            #expect(dry.expiredReservations.map(\.locale) == ["en-US"])
            #expect(try await service.reservations(of: nil).count == 3, "a dry run expires nothing")
            let report = try await service.collectGarbage(dryRun: false)
            #expect(report.expiredReservations.map { "\($0.uid)/\($0.appId)/\($0.locale)" } == ["1000/org.example.a/en-US"])
            #expect(try await service.reservations(of: nil).map(\.locale) == ["de-DE", "fr"])
            #expect(report.removed.isEmpty)
            // The asset it needed is now unneeded since this run, and goes after the grace period.
            let english = try #require(try await service.installedAssets().first { $0.entry.id == "tx-en" })
            #expect(english.unneededSince == clock.wallTime())
            clock.advance(100)
            #expect(try await service.collectGarbage(dryRun: false).removed.map(\.asset) == ["tx-en@1"])
            #expect(try await service.installedAssets().map(\.key) == ["dict-fr@1"])
        }
    }

    @Test("a leased asset is never removed, not after the grace period nor over the store budget")
    func leasedAssetIsKept() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        try await fixture.withService(fixture.settings(gcGracePeriod: 100, maxStoreSize: 1)) { handle async throws in
            let service = handle.service
            let clock = fixture.clock
            let english = Modules.transcriber("en-US")
            let notInstalled = await #expect(throws: AssetError.self) { try await service.lease(english) }
            #expect(notInstalled?.caseName == "notInstalled")
            let unsupported = await #expect(throws: AssetError.self) { try await service.lease(Modules.transcriber("ja-JP")) }
            #expect(unsupported?.caseName == "unsupportedLocale")

            _ = try await service.install([english], for: appA) { _ in }
            clock.advance(5)
            let lease = try await service.lease(Modules.transcriber("en-GB"))
            #expect(lease.key == "tx-en@1")
            #expect(lease.path == fixture.assetsDirectory + "/tx-en/1")
            #expect(await service.leasedAssets == ["tx-en@1"])
            #expect(try await service.installedAssets().first?.lastUsed == clock.wallTime(), "a lease counts as use")
            #expect(try await service.installedAssetInfo().first?.leased == true)

            #expect(try await service.release("en-US", for: appA))
            for _ in 0..<3 {
                let report = try await service.collectGarbage(dryRun: false)
                #expect(report.removed.isEmpty, "\(report.removed)")
                #expect(try await service.installedAssets().first?.unneededSince == nil)
                clock.advance(1000)
            }
            #expect(fixture.exists(lease.path))

            // Once the lease ends it is an ordinary unneeded asset: over budget, it goes at once.
            await service.endLease(lease)
            #expect(await service.leasedAssets.isEmpty)
            #expect(fixture.exists(lease.path), "ending a lease on the current version removes nothing by itself")
            let report = try await service.collectGarbage(dryRun: false)
            #expect(report.removed == [GCRemovalInfo(asset: "tx-en@1", bytes: 100_000, reason: "store budget")])
            #expect(!fixture.exists(lease.path))
        }
    }

    @Test("over MaxStoreSize the least recently used unneeded assets go first; needed ones never")
    func storeBudgetIsLRU() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        try await fixture.withService(fixture.settings(gcGracePeriod: 1_000_000, maxStoreSize: 250_000)) { handle async throws in
            let service = handle.service
            let clock = fixture.clock
            _ = try await service.install([Modules.transcriber("en-US")], for: appA) { _ in }
            clock.advance(10)
            _ = try await service.install([Modules.transcriber("de-DE")], for: appA) { _ in }
            clock.advance(10)
            _ = try await service.install([Modules.dictation("fr")], for: appA) { _ in }
            clock.advance(10)
            // tx-de used last, dict-fr installed last but not used since.
            await service.endLease(try await service.lease(Modules.transcriber("de-DE")))
            #expect(try await service.installedAssets().map(\.bytes) == [100_000, 100_000, 100_000])

            // Over budget, but everything is reserved: nothing goes.
            #expect(try await service.collectGarbage(dryRun: false).removed.isEmpty)

            #expect(try await service.release("de-DE", for: appA))
            #expect(try await service.release("fr", for: appA))
            let expected = [GCRemovalInfo(asset: "dict-fr@1", bytes: 100_000, reason: "store budget")]
            #expect(try await service.collectGarbage(dryRun: true).removed == expected)
            #expect(try await service.installedAssets().count == 3)
            #expect(try await service.collectGarbage(dryRun: false).removed == expected)
            #expect(try await service.installedAssets().map(\.key) == ["tx-de@1", "tx-en@1"])
            #expect(!fixture.exists(fixture.assetsDirectory + "/dict-fr/1"))
            #expect(fixture.exists(fixture.assetsDirectory + "/tx-de/1/model.onnx"))
            // Within budget now: the unneeded tx-de stays until its grace period.
            #expect(try await service.collectGarbage(dryRun: false).removed.isEmpty)
        }
    }

    @Test("prepared custom language models count toward MaxStoreSize")
    func preparedLanguageModelsCountTowardTheStoreBudget() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        try await fixture.withService(fixture.settings(gcGracePeriod: 1_000_000, maxStoreSize: 300_000)) { handle async throws in
            let service = handle.service
            _ = try await service.install([Modules.transcriber("en-US")], for: appA) { _ in }
            _ = try await service.install([Modules.dictation("fr")], for: appA) { _ in }
            #expect(try await service.release("fr", for: appA))
            // 200 000 bytes of assets: within the budget.
            #expect(try await service.collectGarbage(dryRun: true).removed.isEmpty)
            // A prepared model the app's English reservation keeps, big enough to pass it.
            let phrases = (0..<2_000).map { CustomLanguageModelDocument.Phrase(phrase: "move the knight to square \($0) of the board", count: 1) }
            let data = Array(try CustomLanguageModelDocument(locale: "en-US", identifier: "chess", version: "1", phrases: phrases).encoded())
            _ = try await service.languageModels.prepare(data, for: appA, ignoresCache: false)
            #expect(try await service.languageModels.totalBytes() > 100_000)
            #expect(try await service.collectGarbage(dryRun: false).removed.map(\.asset) == ["dict-fr@1"])
            #expect(try await service.languageModels.list(uid: appA.uid).count == 1)
        }
    }

    @Test("GC refuses to run on an inconsistent store; a fresh start repairs it and cleans staging")
    func inconsistentStateAndRepair() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        let fm = FileManager.default
        let english = fixture.assetsDirectory + "/tx-en/1"
        let rogue = fixture.assetsDirectory + "/rogue/7"
        let leftover = fixture.stagingDirectory + "/tx-de-1-0badf00d"
        try await fixture.withService { handle async throws in
            let service = handle.service
            _ = try await service.install([Modules.transcriber("en-US"), Modules.detector], for: appA) { _ in }
            #expect(try await service.collectGarbage(dryRun: false).removed.isEmpty)

            // An installed directory deleted behind the service's back.
            try fm.removeItem(atPath: english)
            for dryRun in [true, false] {
                let error = await #expect(throws: AssetError.self) { try await service.collectGarbage(dryRun: dryRun) }
                #expect(error?.caseName == "inconsistentState")
                #expect("\(String(describing: error))".contains("tx-en@1 is recorded but"))
            }
            #expect(try await service.installedAssets().count == 2, "a refused GC changes nothing")

            // An unrecorded directory appearing in state/assets, and staging leftovers.
            try fm.createDirectory(atPath: rogue, withIntermediateDirectories: true)
            try Data("x".utf8).write(to: URL(fileURLWithPath: rogue + "/model.onnx"))
            try fm.createDirectory(atPath: leftover, withIntermediateDirectories: true)
            try Data("partial".utf8).write(to: URL(fileURLWithPath: leftover + "/model.onnx"))
            let error = await #expect(throws: AssetError.self) { try await service.collectGarbage(dryRun: false) }
            #expect("\(String(describing: error))".contains("rogue/7 is not recorded"))
            #expect(fixture.exists(rogue))
        }

        // A fresh service over the same directories repairs at start.
        try await fixture.withService { handle async throws in
            let service = handle.service
            #expect(try await service.installedAssets().map(\.key) == ["vad@1"])
            #expect(!fixture.exists(fixture.assetsDirectory + "/rogue"))
            #expect(fixture.entries(fixture.stagingDirectory).isEmpty)
            #expect(fixture.contents(fixture.assetsDirectory + "/vad/1/vad.onnx") == StandardFiles.vad)
            #expect(try await service.reservations(of: appA).map(\.locale) == ["en-US"])
            #expect(try await service.collectGarbage(dryRun: false).removed.isEmpty)
            // The lost asset is simply supported again and installs afresh.
            #expect(try await service.status(of: [Modules.transcriber("en-US")]).0 == .supported)
            let again = try await service.install([Modules.transcriber("en-US")], for: appA) { _ in }
            #expect(again.installed == ["tx-en@1"] && again.reserved.isEmpty)
            #expect(fixture.contents(english + "/encoder.onnx") == StandardFiles.txEn["encoder.onnx"])
        }
    }

    @Test("a job interrupted by shutdown resumes at the next start without anyone asking again")
    func interruptedJobResumes() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        var paused = fixture.settings()
        paused.testPause = (.verifying, 60)
        try await fixture.withService(paused) { handle async throws in
            let service = handle.service
            let progress = ProgressLog()
            let waiter = Task { try await service.install([Modules.transcriber("en-US")], for: appA, progress: progress.record) }
            #expect(await eventually { progress.phases.contains(.verifying) })
            await handle.stop()
            let error = await #expect(throws: AssetError.self) { try await waiter.value }
            #expect(error?.caseName == "cancelled")
            #expect(try await service.installedAssets().isEmpty)
        }
        try await fixture.withService { handle async throws in
            let service = handle.service
            #expect(try await eventually { try await service.installedAssets().map(\.key) == ["tx-en@1"] })
            #expect(fixture.contents(fixture.assetsDirectory + "/tx-en/1/tokens.txt") == StandardFiles.txEn["tokens.txt"])
            #expect(fixture.entries(fixture.stagingDirectory).isEmpty)
            #expect(fixture.entries(fixture.downloadsDirectory).isEmpty)
            #expect(try await service.reservations(of: appA).map(\.locale) == ["en-US"])
        }
    }
}
