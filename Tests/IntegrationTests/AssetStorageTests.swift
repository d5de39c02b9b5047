import EarshotSystem
import EarshotWire
import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Disk space: a too-small filesystem (a real 2 MiB tmpfs, mounted by the test as root) gives
/// `insufficientStorage` and leaves nothing half-installed; the tmpfs is always unmounted.
@Suite(.serialized) struct AssetStorageTests {
    @Test func stateDirectoryOnSmallTmpfsRefusesALargerAssetAndStillInstallsASmallOne() async throws {
        var mountPoint = ""
        try await AssetFixture.with { fixture in
            guard let tmpfs = try mountSmallTmpfs(fixture, name: "state-tmpfs") else { return }
            mountPoint = tmpfs
            fixture.stateDirectory = tmpfs
            let big = try await fixture.build(.random("asr-en", locales: ["en-US"], bytes: 3 << 20, seed: 70))
            let small = try await fixture.build(.random("asr-de", locales: ["de-DE"], bytes: 256 << 10, seed: 71))
            try await fixture.publishCatalog(version: 1, assets: [big, small])
            let daemon = try await fixture.startDaemonWithCatalog()
            let client = try TestConnection(daemon.socket)
            defer { client.close() }
            try await client.hello("org.example.disk")

            let refused = try await client.call(InstallRequest(id: "big", modules: [Modules.transcriber("en-US")]), timeout: .seconds(60))
            #expect(refused.errorCode == .insufficientStorage, "\(refused.type): \(refused.errorText ?? "")")
            try await expectNothingInstalled(fixture, client, "asr-en")

            let fits = try await client.call(InstallRequest(id: "small", modules: [Modules.transcriber("de-DE")]), timeout: .seconds(60))
            #expect(try fits.decode(InstallReply.self).installed == ["asr-de@1"])
        }
        if !mountPoint.isEmpty { #expect(!isMounted(mountPoint), "\(mountPoint) is still mounted") }
    }

    @Test func cacheDirectoryOnSmallTmpfsRefusesTheDownloadBeforeFetching() async throws {
        var mountPoint = ""
        try await AssetFixture.with { fixture in
            guard let tmpfs = try mountSmallTmpfs(fixture, name: "cache-tmpfs") else { return }
            mountPoint = tmpfs
            fixture.cacheDirectory = tmpfs
            let big = try await fixture.build(.random("asr-en", locales: ["en-US"], bytes: 3 << 20, seed: 72))
            try await fixture.publishCatalog(version: 1, assets: [big])
            let daemon = try await fixture.startDaemonWithCatalog()
            let client = try TestConnection(daemon.socket)
            defer { client.close() }
            try await client.hello("org.example.disk")
            let refused = try await client.call(InstallRequest(id: "big", modules: [Modules.transcriber("en-US")]), timeout: .seconds(60))
            #expect(refused.errorCode == .insufficientStorage, "\(refused.type): \(refused.errorText ?? "")")
            try await expectNothingInstalled(fixture, client, "asr-en")
            #expect(fixture.downloadEntries.isEmpty, "\(fixture.downloadEntries)")
            #expect(fixture.server.accessLog().filter { $0.path == big.serverPath }.isEmpty)
        }
        if !mountPoint.isEmpty { #expect(!isMounted(mountPoint), "\(mountPoint) is still mounted") }
    }

    /// 300 files of 5 KiB pass the free-space check and the extractor's budget (about 1.5 MiB
    /// declared, each file charged its 5 KiB), but each takes two 4 KiB pages on tmpfs, so the disk
    /// really fills up part-way through extraction. (libarchive reports the failed write as a mere
    /// warning; before that was caught, truncated files were renamed into place and only SQLite
    /// running out of space stopped the commit.) Smaller files no longer get that far: every member
    /// is charged at least a block against `installed_size`.
    @Test func runningOutOfSpaceDuringExtractionIsInsufficientStorage() async throws {
        let files = 300
        var mountPoint = ""
        try await AssetFixture.with { fixture in
            guard let tmpfs = try mountSmallTmpfs(fixture, name: "state-tmpfs") else { return }
            mountPoint = tmpfs
            fixture.stateDirectory = tmpfs
            var spec = AssetSpec.random("asr-en", locales: ["en-US"], bytes: 1024, seed: 73)
            spec.extraMembers = (0..<files).map { (String(format: "vocab/%04d.txt", $0), NginxServer.seededBytes(count: 5 << 10, seed: UInt64(1000 + $0))) }
            let many = try await fixture.build(spec)
            try await fixture.publishCatalog(version: 1, assets: [many])
            let daemon = try await fixture.startDaemonWithCatalog()
            let client = try TestConnection(daemon.socket)
            defer { client.close() }
            try await client.hello("org.example.disk")
            let refused = try await client.call(InstallRequest(id: "many", modules: [Modules.transcriber("en-US")]), timeout: .seconds(60))
            #expect(refused.errorCode == .insufficientStorage, "\(refused.type): \(refused.errorText ?? "")")
            try await expectNothingInstalled(fixture, client, "asr-en")
        }
        if !mountPoint.isEmpty { #expect(!isMounted(mountPoint), "\(mountPoint) is still mounted") }
    }

    /// Issue 8, defect 8b: SQLite's "database or disk is full" used to reach the client as
    /// `internalError`. The state dir is a real 2 MiB tmpfs, filled up once the daemon runs: a
    /// reservation (and the reservation an install makes) is `insufficientStorage` on the wire.
    @Test func fullDiskOnReserveIsInsufficientStorageOnTheWire() async throws {
        var mountPoint = ""
        try await AssetFixture.with { fixture in
            guard let tmpfs = try mountSmallTmpfs(fixture, name: "state-tmpfs") else { return }
            mountPoint = tmpfs
            fixture.stateDirectory = tmpfs
            let en = try await fixture.build(.random("asr-en", locales: ["en-US"], bytes: 64 << 10, seed: 75))
            let de = try await fixture.build(.random("asr-de", locales: ["de-DE"], bytes: 64 << 10, seed: 76))
            try await fixture.publishCatalog(version: 1, assets: [en, de])
            let daemon = try await fixture.startDaemonWithCatalog()
            let client = try TestConnection(daemon.socket)
            defer { client.close() }
            try await client.hello("org.example.disk")
            let filler = try fill(tmpfs)

            let reserve = try await client.call(ReserveRequest(id: "r", locale: "en-US"))
            #expect(reserve.errorCode == .insufficientStorage, "\(reserve.type): \(reserve.errorText ?? "")")
            let install = try await client.call(InstallRequest(id: "i", modules: [Modules.transcriber("de-DE")]), timeout: .seconds(60))
            #expect(install.errorCode == .insufficientStorage, "\(install.type): \(install.errorText ?? "")")

            unlink(filler)
            let reserved = try await client.call(ReserveRequest(id: "again", locale: "en-US"))
            #expect(try reserved.decode(ReserveReply.self).created)
        }
        if !mountPoint.isEmpty { #expect(!isMounted(mountPoint), "\(mountPoint) is still mounted") }
    }

    @Test func installedSizeBeyondTheFreeSpaceOfTheStateFilesystemIsInsufficientStorage() async throws {
        // No mount needed: the catalog declares more than the state dir's filesystem has free.
        try await AssetFixture.with { fixture in
            var spec = AssetSpec.random("asr-en", locales: ["en-US"], bytes: 64 << 10, seed: 74)
            try FileManager.default.createDirectory(atPath: fixture.stateDirectory, withIntermediateDirectories: true)
            var fs = statvfs()
            #expect(statvfs(fixture.stateDirectory, &fs) == 0)
            spec.installedSize = Int64(fs.f_bavail) * Int64(fs.f_frsize) + (1 << 30)
            let huge = try await fixture.build(spec)
            try await fixture.publishCatalog(version: 1, assets: [huge])
            let daemon = try await fixture.startDaemonWithCatalog()
            let client = try TestConnection(daemon.socket)
            defer { client.close() }
            try await client.hello("org.example.disk")
            let refused = try await client.call(InstallRequest(id: "huge", modules: [Modules.transcriber("en-US")]), timeout: .seconds(60))
            #expect(refused.errorCode == .insufficientStorage, "\(refused.type): \(refused.errorText ?? "")")
            try await expectNothingInstalled(fixture, client, "asr-en")
        }
    }

    // MARK: Helpers

    /// Mounts a 2 MiB tmpfs inside the fixture (unmounted at cleanup, after the daemons are gone);
    /// nil, with a note, when this machine does not allow mounting.
    private func mountSmallTmpfs(_ fixture: AssetFixture, name: String) throws -> String? {
        let path = fixture.directory.file(name)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        guard mount("tmpfs", path, "tmpfs", 0, "size=2m,mode=0755") == 0 else {
            let code = errno
            if code == EPERM || code == EACCES {
                print("skipping: mounting a tmpfs is not permitted here (\(String(cString: strerror(code))))")
                return nil
            }
            throw FixtureError("mount tmpfs at \(path): \(String(cString: strerror(code)))")
        }
        fixture.onCleanUp {
            if umount2(path, 0) != 0 { _ = umount2(path, Int32(MNT_DETACH)) }
        }
        return path
    }

    /// Writes a file into `directory` until its filesystem is full; returns the file's path.
    private func fill(_ directory: String) throws -> String {
        let filler = directory + "/filler"
        let fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw FixtureError("open \(filler): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let chunk = [UInt8](repeating: 0xA5, count: 4096)
        while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
        return filler
    }

    private func isMounted(_ path: String) -> Bool {
        let mounts = (try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8)) ?? ""
        return mounts.split(separator: "\n").contains { $0.split(separator: " ").dropFirst().first.map(String.init) == path }
    }

    /// Nothing of `id` recorded or on disk, no job left, no staging leftovers; the store stays
    /// consistent (GC, which refuses an inconsistent store, runs).
    private func expectNothingInstalled(_ fixture: AssetFixture, _ client: TestConnection, _ id: String) async throws {
        let assets = try await client.call(AssetsRequest(id: "assets")).decode(AssetsReply.self)
        #expect(!assets.assets.contains { $0.id == id })
        #expect(assets.jobs.isEmpty)
        #expect(fixture.installedVersionDirectories(id).isEmpty)
        #expect(fixture.stagingEntries.isEmpty, "staging leftovers: \(fixture.stagingEntries)")
        let status = try await client.call(ModuleStatusRequest(id: "s", modules: [Modules.transcriber("en-US")])).decode(ModuleStatusReply.self)
        #expect(status.status == .supported)
        let gc = try await client.call(GCRequest(id: "gc", dryRun: true))
        #expect(gc.type == GCReply.eventType, "GC refused: \(gc.errorText ?? "")")
    }
}
