@testable import EarshotAssets
import EarshotSystem
import EarshotWire
import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Regressions of issue 8 (the inventory held under hostile use): each test is named after the
/// defect it reproduces and failed before the fix.
@Suite("Inventory: issue 8 regressions", .serialized)
struct InventoryHardeningTests {
    // MARK: 4. Moving the state directory

    /// `state.db` used to store absolute paths: after a move, start-up repair dropped every row as
    /// "missing" and deleted every tree as "not recorded".
    @Test func movingTheStateDirectoryKeepsInstalledAssets() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        try await fixture.withService { handle async throws in
            _ = try await handle.service.install([Modules.transcriber("en-US"), Modules.detector], for: appA) { _ in }
        }

        let moved = fixture.directory.file("moved/state")
        try FileManager.default.createDirectory(atPath: fixture.directory.file("moved"), withIntermediateDirectories: true)
        try FileManager.default.moveItem(atPath: fixture.stateDirectory, toPath: moved)
        var settings = fixture.settings()
        settings.stateDirectory = moved
        try await fixture.withService(settings) { handle async throws in
            let service = handle.service
            let installed = try await service.installedAssets()
            #expect(installed.map(\.key) == ["tx-en@1", "vad@1"])
            #expect(installed.map(\.path) == [moved + "/assets/tx-en/1", moved + "/assets/vad/1"])
            for (name, bytes) in StandardFiles.txEn {
                #expect(fixture.contents(moved + "/assets/tx-en/1/" + name) == bytes, "\(name)")
            }
            #expect(fixture.contents(moved + "/assets/vad/1/vad.onnx") == StandardFiles.vad)
            #expect(try await service.status(of: [Modules.transcriber("en-US")]).0 == .installed)
            let lease = try await service.lease(Modules.transcriber("en-GB"))
            #expect(lease.path == moved + "/assets/tx-en/1")
            await service.endLease(lease)
            // Consistent: GC (which refuses an inconsistent store) runs and removes nothing.
            #expect(try await service.collectGarbage(dryRun: false).removed.isEmpty)
            #expect(try await service.reservations(of: appA).map(\.locale) == ["en-US"])
        }
    }

    /// Repair re-identifies what it can instead of deleting it: a row whose absolute path differs
    /// only by the state directory prefix, and a row pointing elsewhere whose asset's tree is in its
    /// place with matching content. A tree that matches nothing is still removed.
    @Test func repairNeverDeletesWhatItCanReidentify() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        try await fixture.withService { handle async throws in
            _ = try await handle.service.install([Modules.transcriber("en-US"), Modules.dictation("fr")], for: appA) { _ in }
        }
        // Rows as an older release (or a restored backup) could have left them.
        do {
            let db = try Database(path: fixture.stateDirectory + "/state.db", migrations: Schema.migrations)
            try await db.write { db in
                try db.execute("UPDATE installed_assets SET path = '/var/lib/earshot-before/assets/tx-en/1' WHERE id = 'tx-en'")
                try db.execute("UPDATE installed_assets SET path = '/srv/elsewhere/french' WHERE id = 'dict-fr'")
            }
        }
        let rogue = fixture.assetsDirectory + "/tx-en/7"
        try FileManager.default.createDirectory(atPath: rogue, withIntermediateDirectories: true)
        try Data("x".utf8).write(to: URL(fileURLWithPath: rogue + "/encoder.onnx"))

        try await fixture.withService { handle async throws in
            let service = handle.service
            let installed = try await service.installedAssets()
            #expect(installed.map(\.key) == ["dict-fr@1", "tx-en@1"])
            #expect(installed.map(\.path) == ["dict-fr/1", "tx-en/1"].map { fixture.assetsDirectory + "/" + $0 })
            #expect(fixture.contents(fixture.assetsDirectory + "/tx-en/1/encoder.onnx") == StandardFiles.txEn["encoder.onnx"])
            #expect(fixture.exists(fixture.assetsDirectory + "/dict-fr/1/model/fr.dict"))
            #expect(!fixture.exists(rogue), "an unrecorded tree matching no row is still removed")
            #expect(try await service.collectGarbage(dryRun: true).removed.isEmpty)
        }
    }

    // MARK: 5. Failed installs and reservations

    /// Each failed install used to keep the reservation it created: with a quota of 3, three
    /// failures locked the app out.
    @Test func failedInstallsDoNotKeepTheirReservations() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        let wrong = String(repeating: "0123456789abcdef", count: 4)
        let good = try await fixture.tarGz("good", ["model.onnx": StandardFiles.bytes(20_000, seed: 40)])
        let hostile = fixture.directory.file("src/hostile.tar.gz")
        try await ExtractFixture.python("dotdot", hostile, in: fixture.directory)
        let assets = [
            try fixture.asset("tx-it", locales: ["it-IT"], path: good, files: ["model": "model.onnx"], sha256: wrong),
            try fixture.asset("tx-es", locales: ["es-ES"], path: good, files: ["model": "model.onnx"], urls: ["file://" + fixture.directory.file("src/missing.tar.gz")]),
            try fixture.asset("tx-pt", locales: ["pt-BR"], path: hostile, files: ["model": "ok.txt"]),
            try fixture.asset("tx-nl", locales: ["nl-NL"], path: good, files: ["model": "not-in-the-archive.onnx"]),
            try fixture.asset("tx-sv", locales: ["sv-SE"], path: good, files: ["model": "model.onnx"]),
        ]
        try await fixture.publish(version: 1, assets)
        try await fixture.withService(fixture.settings(maxReservedLocales: 3)) { handle async throws in
            let service = handle.service
            for locale in ["it-IT", "es-ES", "pt-BR", "nl-NL"] {
                let error = await #expect(throws: AssetError.self) { try await service.install([Modules.transcriber(locale)], for: appA) { _ in } }
                #expect(error?.caseName != "quotaExceeded", "\(locale): \(String(describing: error))")
                #expect(try await service.reservations(of: appA).isEmpty, "\(locale): the failed install's reservation is rolled back")
            }
            #expect(try await service.reserve("sv-SE", for: appA))

            // A reservation the app made before a failing install is not the install's to roll back.
            #expect(try await service.reserve("it-IT", for: appA))
            await #expect(throws: AssetError.self) { try await service.install([Modules.transcriber("it-IT")], for: appA) { _ in } }
            #expect(try await service.reservations(of: appA).map(\.locale) == ["it-IT", "sv-SE"])
            let outcome = try await service.install([Modules.transcriber("sv-SE")], for: appA) { _ in }
            #expect(outcome.installed == ["tx-sv@1"])
        }
    }

    // MARK: 7. Orphaned downloads

    /// Start-up and GC kept every partial in the download cache: failed jobs' and planted ones.
    /// Now both remove what no job and no resumable (cancelled) install needs; a dry run reports
    /// it with its bytes.
    @Test func orphanedDownloadsAreCleaned() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        let keepServer = try await NginxServer.start(.init(rateLimit: "128k"))
        let failServer = try await NginxServer.start(.init(rateLimit: "128k"))
        let modified = Date(timeIntervalSince1970: 1_700_000_000)
        let keepArchive = try await fixture.tarGz("tx-keep", ["model.onnx": StandardFiles.bytes(640 << 10, seed: 41)])
        let failArchive = try await fixture.tarGz("tx-fail", ["model.onnx": StandardFiles.bytes(640 << 10, seed: 42)])
        let keep = try fixture.asset("tx-keep", locales: ["en-US"], path: keepArchive, files: ["model": "model.onnx"],
                                     urls: [try keepServer.put("keep.tar.gz", try #require(fixture.contents(keepArchive)), modified: modified)])
        let fail = try fixture.asset("tx-fail", locales: ["de-DE"], path: failArchive, files: ["model": "model.onnx"],
                                     urls: [try failServer.put("fail.tar.gz", try #require(fixture.contents(failArchive)), modified: modified)])
        let planted = try fixture.asset("tx-planted", locales: ["fr"], path: try fixture.plainFile("planted", StandardFiles.bytes(1000, seed: 43)),
                                        format: .file, files: ["model": "m.onnx"])
        try await fixture.publish(version: 1, [keep, fail, planted])
        let downloads = fixture.downloadsDirectory
        func plant(_ name: String, _ bytes: Int) throws {
            try Data(StandardFiles.bytes(bytes, seed: 44)).write(to: URL(fileURLWithPath: downloads + "/" + name))
        }

        // Progress of real transfers, paced by real time.
        try await fixture.withService(clock: SystemServiceClock()) { handle async throws in
            let service = handle.service
            // A job cancelled mid-download (its last reservation released): resumable, kept.
            let keepLog = ProgressLog()
            let keeping = Task { try await service.install([Modules.transcriber("en-US")], for: appA, progress: keepLog.record) }
            // A job whose only mirror goes away mid-download: failed.
            let failLog = ProgressLog()
            let failing = Task { try await service.install([Modules.transcriber("de-DE")], for: appB, progress: failLog.record) }
            #expect(await eventually { keepLog.maxBytesDone > 0 && failLog.maxBytesDone > 0 })
            #expect(try await service.release("en-US", for: appA))
            await #expect(throws: AssetError.self) { try await keeping.value }
            await failServer.stop()
            let failure = await #expect(throws: AssetError.self) { try await failing.value }
            #expect(failure?.caseName == "downloadFailed", "\(String(describing: failure))")
            #expect(await service.jobInfo().isEmpty)
            #expect(fixture.size(downloads + "/" + keep.sha256).map { $0 > 0 && $0 < keep.size } == true)

            // Planted: a stray file, a partial of a catalog asset no job wants (what a failed job
            // used to leave), with its sidecar and a half-written sidecar.
            try plant("stray.part", 3000)
            try plant(planted.sha256, 500)
            try plant(planted.sha256 + ".meta", 40)
            try plant(fail.sha256 + ".meta.tmp", 20)

            let dryRun = try await service.collectGarbage(dryRun: true)
            let reported = Set(dryRun.removed.map(\.asset))
            #expect(reported.contains { $0.contains("stray.part") }, "\(dryRun.removed)")
            #expect(reported.contains { $0.contains(planted.sha256) }, "\(dryRun.removed)")
            #expect(!reported.contains { $0.contains(keep.sha256) }, "\(dryRun.removed)")
            #expect(dryRun.freedBytes >= 3000 + 500 + 40 + 20)
            #expect(fixture.exists(downloads + "/stray.part"), "a dry run removes nothing")

            _ = try await service.collectGarbage(dryRun: false)
            #expect(fixture.entries(downloads) == [keep.sha256, keep.sha256 + ".meta"].sorted())
        }

        // At start-up too: a stray planted while the daemon was down goes, the resumable one stays.
        try plant("another.stray", 100)
        try plant(fail.sha256, 700)
        try await fixture.withService(running: false) { handle async throws in
            #expect(fixture.entries(downloads) == [keep.sha256, keep.sha256 + ".meta"].sorted())
            #expect(try await handle.service.collectGarbage(dryRun: true).orphanedDownloads.isEmpty)
            // A cancelled install is resumable for the GC grace period, then its partial goes too
            // (the cancellation was dated by the system clock the first service ran on).
            fixture.clock.advance(Date().timeIntervalSince1970 - fixture.clock.wallTime() + 86400)
            let report = try await handle.service.collectGarbage(dryRun: false)
            #expect(report.orphanedDownloads.map(\.asset) == ["downloads/" + keep.sha256], "\(report.removed)")
            #expect(report.summary.contains("1 orphaned download(s)"), "\(report.summary)")
            #expect(fixture.entries(downloads).isEmpty)
        }
    }

    // MARK: 8b. Full disk

    /// SQLite's "database or disk is full" on reserve (and on the reservation an install makes)
    /// used to reach clients as `internalError`; it is `insufficientStorage`. The state dir is a
    /// real 1 MiB tmpfs, filled up after the service started.
    @Test func fullDiskOnReserveOrInstallIsInsufficientStorage() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        guard let tmpfs = try SmallTmpfs(at: fixture.directory.file("state-tmpfs"), size: "1m") else { return }
        defer { tmpfs.unmount() }
        var settings = fixture.settings()
        settings.stateDirectory = tmpfs.path + "/state"
        try await fixture.withService(settings) { handle async throws in
            let service = handle.service
            let filler = try tmpfs.fill()
            let reserve = await #expect(throws: AssetError.self) { try await service.reserve("en-US", for: appA) }
            #expect(reserve?.caseName == "insufficientStorage", "\(String(describing: reserve))")
            let install = await #expect(throws: AssetError.self) { try await service.install([Modules.transcriber("de-DE", hints: ["farField"])], for: appA) { _ in } }
            #expect(install?.caseName == "insufficientStorage", "\(String(describing: install))")

            // Space again: the same calls work, nothing was half-recorded.
            unlink(filler)
            #expect(try await service.reservations(of: appA).isEmpty)
            #expect(try await service.reserve("en-US", for: appA))
        }
    }

    /// Issue 9, defect 4: with the state disk full, opening a session failed ("database or disk is
    /// full") because leasing an installed asset wrote SQLite first. The lease and the reservation
    /// use are now deferred: sessions go on, GC refuses to run until they are written, and the
    /// deferred use keeps the reservation from expiring. The state dir is a real 4 MiB tmpfs.
    @Test func fullStateDiskStillLeasesInstalledAssetsAndNeverLosesAReservation() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        guard let tmpfs = try SmallTmpfs(at: fixture.directory.file("state-tmpfs"), size: "4m") else { return }
        defer { tmpfs.unmount() }
        var settings = fixture.settings(reservationExpiry: 100)
        settings.stateDirectory = tmpfs.path + "/state"
        try await fixture.withService(settings) { handle async throws in
            let service = handle.service
            let english = Modules.transcriber("en-US")
            _ = try await service.install([english], for: appA) { _ in }
            let filler = try tmpfs.fill()
            await #expect(throws: AssetError.self) { try await service.reserve("de-DE", for: appA) } // writes still fail

            fixture.clock.advance(90)
            let lease = try await service.lease(english)
            #expect(fixture.exists(lease.path + "/encoder.onnx"))
            await service.noteUse(of: [english], by: appA)
            await service.endLease(lease)
            await service.settleDeferredUses() // the uses are written (and refused) in the background
            #expect(fixture.logs.all.filter { $0.priority == .warning && $0.message.hasPrefix("recording asset and reservation use failed") }.count == 1)

            // Past the expiry of the stored use, within that of the deferred one: GC waits.
            fixture.clock.advance(20)
            let refused = await #expect(throws: AssetError.self) { try await service.collectGarbage(dryRun: false) }
            #expect(refused?.caseName == "insufficientStorage", "\(String(describing: refused))")
            #expect(try await service.reservations(of: appA).map(\.locale) == ["en-US"])

            // Space again: the deferred uses are written first, so the reservation stays.
            unlink(filler)
            let report = try await service.collectGarbage(dryRun: false)
            #expect(report.expiredReservations.isEmpty && report.removedAssets.isEmpty, "\(report.summary)")
            let reservation = try #require(try await service.reservations(of: appA).first)
            #expect(reservation.lastUsed == fixture.clock.wallTime() - 20)
            #expect(fixture.logs.all.contains { $0.message == "recorded the asset and reservation use deferred by a failed write" })
        }
    }

    /// The typed errors behind a full disk, whichever part raises them, are `insufficientStorage`
    /// (injected: SQLite's codes, errno from a syscall, libarchive, libcurl writes, Foundation).
    @Test func storageFullErrorsMapToInsufficientStorage() throws {
        let full = DatabaseError(function: "sqlite3_step", code: 13, message: "database or disk is full")
        let ioFull = DatabaseError(function: "sqlite3_step", code: 778, message: "disk I/O error", systemErrno: ENOSPC) // SQLITE_IOERR_WRITE
        let other = DatabaseError(function: "sqlite3_step", code: 11, message: "database disk image is malformed")
        #expect(full.isStorageFull && ioFull.isStorageFull && !other.isStorageFull)
        #expect(AssetError(full, database: "/state").caseName == "insufficientStorage")
        #expect(AssetError(ioFull, database: "/state").caseName == "insufficientStorage")
        #expect(AssetError(other, database: "/state").caseName == "internalError")

        let entry = CatalogAsset(id: "a", version: 1, kind: .transcriber, engine: "e", locales: ["en-US"], size: 10, installedSize: 10,
                                 sha256: String(repeating: "0", count: 64), urls: ["file:///x"], format: .tarGz, files: ["m": "m"], license: "MIT")
        let disk: [any Error] = [
            full, SystemError("rename", errno: ENOSPC), SystemError("write", errno: EDQUOT),
            ExtractionError.io(SystemError("archive_write_data_block", errno: ENOSPC)),
            DownloadError.io(SystemError("pwrite", errno: ENOSPC)), DownloadError.insufficientStorage(needed: 10, available: 1),
            CocoaError(.fileWriteOutOfSpace), POSIXError(.ENOSPC),
        ]
        for error in disk {
            #expect(AssetService.map(error, asset: entry).caseName == "insufficientStorage", "\(error)")
        }
        #expect(AssetService.map(SystemError("rename", errno: EACCES), asset: entry).caseName == "internalError")
        #expect(AssetService.map(other, asset: entry).caseName == "internalError")
    }

    // MARK: 11. Inode bombs

    /// 20,000 empty files used to install: `installed_size` counted bytes only. Each member is now
    /// charged at least one block, so the archive is refused, and nothing is left in staging.
    @Test func inodeBombsDoNotInstall() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        let archive = fixture.directory.file("src/inodes.tar.gz")
        try await ExtractFixture.python("empty-files", archive, ["20000"], in: fixture.directory)
        let entry = try fixture.asset("tx-inodes", locales: ["en-US"], path: archive, files: ["model": "f000000"])
        try await fixture.publish(version: 1, [entry])
        try await fixture.withService { handle async throws in
            let service = handle.service
            let error = await #expect(throws: AssetError.self) { try await service.install([Modules.transcriber("en-US")], for: appA) { _ in } }
            #expect(error?.caseName == "verificationFailed", "\(String(describing: error))")
            #expect(try await service.installedAssets().isEmpty)
            #expect(fixture.entries(fixture.stagingDirectory).isEmpty)
            #expect(fixture.entries(fixture.assetsDirectory).isEmpty)
        }
    }
}
