import EarshotWire
import Foundation
import Testing
import TestSupport

/// Issue 9: the update service's `ExecStart` (`earshotctl update`), run by hand against a real
/// daemon, a real nginx and real minisign, gives the documented exit codes; the dry run changes
/// nothing; a bad hash is not downloaded twice; an offline day is a warning, not a failure.
@Suite struct UpdateCommandTests {
    func ctl(_ arguments: [String], _ daemon: TestDaemon) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await ChildProcess.run(BuiltProducts.path("earshotctl"), ["--socket", daemon.socket] + arguments, in: daemon.directory)
    }

    @Test func updateExitCodesDryRunBadHashAndOffline() async throws {
        try await AssetFixture.with { fixture in
            let v1 = try await fixture.build(.random("asr-en", version: 1, locales: ["en-US"], bytes: 256 << 10, seed: 60))
            try await fixture.publishCatalog(version: 1, assets: [v1], modified: Date(timeIntervalSinceNow: -3600))
            let daemon = try await fixture.startDaemonWithCatalog()
            let admin = try TestConnection(daemon.socket)
            defer { admin.close() }
            try await admin.hello("org.example.update")
            _ = try await admin.call(InstallRequest(id: "i", modules: [Modules.transcriber("en-US")]), timeout: .seconds(60)).decode(InstallReply.self)

            // A command given an option it does not take fails instead of ignoring it.
            let unsupported = try await ctl(["install", "--locale", "en-US", "--dry-run"], daemon)
            #expect(unsupported.status == 1)
            #expect(unsupported.stderr.contains("'install' does not take --dry-run"), "\(unsupported.stderr)")
            #expect(try await ctl(["status", "--all"], daemon).status == 1)

            // Dry run: lists the change, changes nothing (issue 9, defect 1).
            let v2 = try await fixture.build(.random("asr-en", version: 2, locales: ["en-US"], bytes: 256 << 10, seed: 61))
            try await fixture.publishCatalog(version: 2, assets: [v2], modified: Date(timeIntervalSinceNow: -1800))
            let dry = try await ctl(["update", "--dry-run"], daemon)
            #expect(dry.status == 0, "\(dry.stdout)\(dry.stderr)")
            #expect(dry.stdout.contains("would update asr-en 1 → 2: fetch "), "\(dry.stdout)")
            let dryJSON = try await ctl(["update", "--dry-run", "--json"], daemon)
            let plan = try JSONDecoder().decode(UpdateReply.self, from: Data(dryJSON.stdout.utf8))
            #expect(plan.dryRun && plan.planned.map(\.toVersion) == [2] && plan.planned.first?.downloadBytes == v2.size)
            #expect(fixture.server.accessLog().filter { $0.path == v2.serverPath }.isEmpty, "no byte of v2 fetched")
            #expect(fixture.installedVersionDirectories("asr-en") == ["1"])
            let catalog = try await admin.call(CatalogRequest(id: "c")).decode(CatalogReply.self)
            #expect(catalog.sources.map(\.version) == [1], "the new catalog is not stored")

            // The real run: 0, then 2.
            let real = try await ctl(["update"], daemon)
            #expect(real.status == 0, "\(real.stdout)\(real.stderr)")
            #expect(real.stdout.contains("updated asr-en@1→2"))
            #expect(daemon.child.stderr.contains("earshotd[notice]: assets: updated asr-en 1 → 2 (by uid \(getuid()))"))
            let idle = try await ctl(["update"], daemon)
            #expect(idle.status == 2 && idle.stdout.contains("nothing to update"))

            // Rollback restores v1 and its files; the next update does not reinstall v2 (issue 9, 6).
            #expect(fixture.installedVersionDirectories("asr-en") == ["1", "2"], "v1 is kept for the rollback window")
            let rollback = try await ctl(["rollback", "asr-en"], daemon)
            #expect(rollback.status == 0 && rollback.stdout.contains("rolled back asr-en 2 → 1"), "\(rollback.stdout)\(rollback.stderr)")
            let afterRollback = try await admin.call(AssetsRequest(id: "a")).decode(AssetsReply.self)
            let current = afterRollback.assets.first { $0.current }
            let restored = try #require(current)
            #expect(restored.version == 1 && fixture.contentProblems(v1, at: restored.path).isEmpty)
            #expect(try await ctl(["update"], daemon).status == 2, "the rolled-back v2 is not installed again")

            // A bad hash: 1 (needs an admin), and the same bytes are not fetched again (defect 7).
            var v3 = try await fixture.build(.random("asr-en", version: 3, locales: ["en-US"], bytes: 256 << 10, seed: 62))
            v3.sha256 = String(repeating: "f", count: 64)
            try await fixture.publishCatalog(version: 3, assets: [v3], modified: Date(timeIntervalSinceNow: -900))
            let bad = try await ctl(["update"], daemon)
            #expect(bad.status == 1, "\(bad.stdout)\(bad.stderr)")
            #expect(await fixture.requests(for: v3).count == 1)
            let badAgain = try await ctl(["update"], daemon)
            #expect(badAgain.status == 1)
            #expect(badAgain.stderr.contains("not downloaded again"), "\(badAgain.stderr)")
            #expect(fixture.server.accessLog().filter { $0.path == v3.serverPath }.count == 1, "no second download of the same bytes")
            #expect(daemon.child.stderr.contains("earshotd[warning]: assets: install of asr-en@3 failed"))
            #expect(fixture.installedVersionDirectories("asr-en") == ["1", "2"])

            // The catalog listing says which older version is installed (issue 9, 10).
            let listing = try await admin.call(CatalogRequest(id: "c2")).decode(CatalogReply.self)
            #expect(listing.assets.map { "\($0.id)@\($0.version) installed=\($0.installed) current=\($0.installedVersion ?? 0)" } == ["asr-en@3 installed=false current=1"])
            #expect(try await ctl(["catalog"], daemon).stdout.contains("version 1 (older)"))
        }
    }

    @Test func offlineUpdateIsNothingToDoWithAWarning() async throws {
        try await AssetFixture.with { fixture in
            let v1 = try await fixture.build(.random("asr-en", version: 1, locales: ["en-US"], bytes: 64 << 10, seed: 63))
            try await fixture.publishCatalog(version: 1, assets: [v1])
            let daemon = try await fixture.startDaemonWithCatalog()
            // Offline: 2 with a warning naming the source and curl's reason (defects 2, 3, 5).
            await fixture.server.stop()
            let offline = try await ctl(["update"], daemon)
            #expect(offline.status == 2, "\(offline.stdout)\(offline.stderr)")
            #expect(offline.stderr.contains("warning: catalog \(fixture.server.url("/catalog.json")) unreachable"), "\(offline.stderr)")
            let warning = daemon.child.stderr.split(separator: "\n").last { $0.contains("earshotd[warning]") && $0.contains("unreachable") }
            #expect(warning?.contains("Failed to connect to 127.0.0.1") == true, "\(String(describing: warning))")
            #expect(warning?.contains("source=\(fixture.server.url("/catalog.json"))") == true)
            #expect(warning?.contains("stalled") == false)
        }
    }
}
