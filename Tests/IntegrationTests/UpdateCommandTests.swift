import EarshotWire
import Foundation
import Testing
import TestSupport

/// Issue 9: the update service's `ExecStart` (`earshotctl update`), run by hand against a real
/// daemon, a real nginx and real minisign, gives the documented exit codes; the dry run changes
/// nothing; a bad hash is not downloaded twice; an offline day is a warning, not a failure.
@Suite struct UpdateCommandTests {
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
            let unsupported = try await daemon.earshotctl(["rollback", "asr-en", "--dry-run"])
            #expect(unsupported.status == 64)
            #expect(unsupported.stderr.contains("'rollback' does not take --dry-run"), "\(unsupported.stderr)")
            #expect(try await daemon.earshotctl(["install", "--locale", "en-US", "--timer"]).status == 64, "--timer is update's only")
            #expect(try await daemon.earshotctl(["status", "--all"]).status == 64)

            // Dry run: lists the change, changes nothing (issue 9, defect 1).
            let v2 = try await fixture.build(.random("asr-en", version: 2, locales: ["en-US"], bytes: 256 << 10, seed: 61))
            try await fixture.publishCatalog(version: 2, assets: [v2], modified: Date(timeIntervalSinceNow: -1800))
            let dry = try await daemon.earshotctl(["update", "--dry-run"])
            #expect(dry.status == 0, "\(dry.stdout)\(dry.stderr)")
            #expect(dry.stdout.contains("would update asr-en 1 → 2: fetch "), "\(dry.stdout)")
            let dryJSON = try await daemon.earshotctl(["update", "--dry-run", "--json"])
            let plan = try JSONDecoder().decode(UpdateReply.self, from: Data(dryJSON.stdout.utf8))
            #expect(plan.dryRun && plan.planned.map(\.toVersion) == [2] && plan.planned.first?.downloadBytes == v2.size)
            #expect(fixture.server.accessLog().filter { $0.path == v2.serverPath }.isEmpty, "no byte of v2 fetched")
            #expect(fixture.installedVersionDirectories("asr-en") == ["1"])
            let catalog = try await admin.call(CatalogRequest(id: "c")).decode(CatalogReply.self)
            #expect(catalog.sources.map(\.version) == [1], "the new catalog is not stored")

            // The real run: 0, then 2.
            let real = try await daemon.earshotctl(["update"])
            #expect(real.status == 0, "\(real.stdout)\(real.stderr)")
            #expect(real.stdout.contains("updated asr-en@1→2"))
            #expect(daemon.child.stderr.contains("earshotd[notice]: assets: updated asr-en 1 → 2 (by uid \(getuid()))"))
            let idle = try await daemon.earshotctl(["update"])
            #expect(idle.status == 2 && idle.stdout.contains("nothing to update"))

            // Rollback restores v1 and its files; the next update does not reinstall v2 (issue 9, 6).
            #expect(fixture.installedVersionDirectories("asr-en") == ["1", "2"], "v1 is kept for the rollback window")
            let rollback = try await daemon.earshotctl(["rollback", "asr-en"])
            #expect(rollback.status == 0 && rollback.stdout.contains("rolled back asr-en 2 → 1"), "\(rollback.stdout)\(rollback.stderr)")
            let afterRollback = try await admin.call(AssetsRequest(id: "a")).decode(AssetsReply.self)
            let current = afterRollback.assets.first { $0.current }
            let restored = try #require(current)
            #expect(restored.version == 1 && fixture.contentProblems(v1, at: restored.path).isEmpty)
            #expect(try await daemon.earshotctl(["update"]).status == 2, "the rolled-back v2 is not installed again")

            // A bad hash: 1 (needs an admin), and the same bytes are not fetched again (defect 7).
            var v3 = try await fixture.build(.random("asr-en", version: 3, locales: ["en-US"], bytes: 256 << 10, seed: 62))
            v3.sha256 = String(repeating: "f", count: 64)
            try await fixture.publishCatalog(version: 3, assets: [v3], modified: Date(timeIntervalSinceNow: -900))
            let bad = try await daemon.earshotctl(["update"])
            #expect(bad.status == 1, "\(bad.stdout)\(bad.stderr)")
            #expect(await fixture.requests(for: v3).count == 1)
            let badAgain = try await daemon.earshotctl(["update"])
            #expect(badAgain.status == 1)
            #expect(badAgain.stderr.contains("not downloaded again"), "\(badAgain.stderr)")
            #expect(fixture.server.accessLog().filter { $0.path == v3.serverPath }.count == 1, "no second download of the same bytes")
            // Regression (issue 9, defect 10): the asset was named twice ("install of asr-en@3
            // failed: asr-en@3: …", "failed: asr-en@3: asr-en@3: …").
            #expect(daemon.child.stderr.contains("earshotd[warning]: assets: install failed: asr-en@3: downloaded file does not match"), "\(daemon.child.stderr)")
            #expect(!daemon.child.stderr.contains("asr-en@3: asr-en@3") && !bad.stderr.contains("asr-en@3: asr-en@3"), "\(bad.stderr)")
            #expect(fixture.installedVersionDirectories("asr-en") == ["1", "2"])

            // The catalog listing says which older version is installed (issue 9, 10).
            let listing = try await admin.call(CatalogRequest(id: "c2")).decode(CatalogReply.self)
            #expect(listing.assets.map { "\($0.id)@\($0.version) installed=\($0.installed) current=\($0.installedVersion ?? 0)" } == ["asr-en@3 installed=false current=1"])
            #expect(try await daemon.earshotctl(["catalog"]).stdout.contains("version 1 (older)"))
        }
    }

    @Test func offlineUpdateIsNothingToDoWithAWarning() async throws {
        try await AssetFixture.with { fixture in
            let v1 = try await fixture.build(.random("asr-en", version: 1, locales: ["en-US"], bytes: 64 << 10, seed: 63))
            try await fixture.publishCatalog(version: 1, assets: [v1])
            let daemon = try await fixture.startDaemonWithCatalog()
            // Offline: 2 with a warning naming the source and curl's reason (defects 2, 3, 5).
            await fixture.server.stop()
            let offline = try await daemon.earshotctl(["update"])
            #expect(offline.status == 2, "\(offline.stdout)\(offline.stderr)")
            #expect(offline.stderr.contains("warning: catalog \(fixture.server.url("/catalog.json")) unreachable"), "\(offline.stderr)")
            let warning = daemon.child.stderr.split(separator: "\n").last { $0.contains("earshotd[warning]") && $0.contains("unreachable") }
            #expect(warning?.contains("Failed to connect to 127.0.0.1") == true, "\(String(describing: warning))")
            #expect(warning?.contains("source=\(fixture.server.url("/catalog.json"))") == true)
            #expect(warning?.contains("stalled") == false)
        }
    }

    /// A per-user daemon (no update timer) kept the version it first installed for good: after
    /// Scripts/setup.sh raised whisper-base to 2, `earshot transcribe` still used 1. In user mode
    /// `[Assets] UpdateIntervalSec=auto` updates at start (and daily); 0 turns that off.
    @Test func aUserModeDaemonUpdatesAtStartUnlessTheIntervalIsZero() async throws {
        try await AssetFixture.with { fixture in
            let v1 = try await fixture.build(.random("asr-en", version: 1, locales: ["en-US"], bytes: 64 << 10, seed: 64))
            try await fixture.publishCatalog(version: 1, assets: [v1], modified: Date(timeIntervalSinceNow: -3600))
            let first = try await fixture.startDaemonWithCatalog("[Assets]\nUpdateIntervalSec=0")
            let admin = try TestConnection(first.socket)
            try await admin.hello("org.example.update")
            _ = try await admin.call(InstallRequest(id: "i", modules: [Modules.transcriber("en-US")]), timeout: .seconds(60)).decode(InstallReply.self)
            admin.close()
            let v2 = try await fixture.build(.random("asr-en", version: 2, locales: ["en-US"], bytes: 64 << 10, seed: 65))
            try await fixture.publishCatalog(version: 2, assets: [v2], modified: Date(timeIntervalSinceNow: -1800))

            // Off: a restart fetches nothing and keeps v1.
            await first.cleanUp()
            let off = try await fixture.startDaemon("[Assets]\nUpdateIntervalSec=0")
            let offStatus = try await off.earshotctl(["status", "--json"])
            #expect(offStatus.status == 0 && !offStatus.stdout.contains("\"schedule\""), "\(offStatus.stdout)")
            #expect(fixture.installedVersionDirectories("asr-en") == ["1"])
            await off.cleanUp()

            // The default (auto) in user mode: the start updates to v2, logged as by schedule.
            let daemon = try await fixture.startDaemon()
            var updated = false
            for _ in 0..<500 where !updated {
                updated = daemon.child.stderr.contains("earshotd[notice]: assets: updated asr-en 1 → 2 (by schedule)")
                if !updated { try await Task.sleep(for: .milliseconds(20)) }
            }
            #expect(updated, "\(daemon.child.stderr)")
            let status = try await daemon.earshotctl(["status", "--json"])
            let reply = try JSONDecoder().decode(DaemonStatus.self, from: Data(status.stdout.utf8))
            #expect(reply.lastUpdate?.requestedBy == "schedule" && reply.lastUpdate?.outcome == "changed", "\(status.stdout)")
            #expect(try await daemon.earshotctl(["update"]).status == 2, "nothing left for a manual run")
        }
    }

    /// Issue 9, "hold skips an update": a held asset stays at its version through the timer's and
    /// manual updates (the dry run lists it as held); status and catalog say so; after unhold the
    /// next update installs v2, logged once as "by timer". Also `install --dry-run` lists what it
    /// would fetch and fetches nothing.
    @Test func holdSkipsAnUpdateUntilUnhold() async throws {
        try await AssetFixture.with { fixture in
            let v1 = try await fixture.build(.random("asr-en", version: 1, locales: ["en-US"], bytes: 64 << 10, seed: 64))
            try await fixture.publishCatalog(version: 1, assets: [v1], modified: Date(timeIntervalSinceNow: -3600))
            let daemon = try await fixture.startDaemonWithCatalog()
            let admin = try TestConnection(daemon.socket)
            defer { admin.close() }
            try await admin.hello("org.example.hold")
            _ = try await admin.call(InstallRequest(id: "i", modules: [Modules.transcriber("en-US")]), timeout: .seconds(60)).decode(InstallReply.self)

            let missing = try await daemon.earshotctl(["hold", "asr-xx"])
            #expect(missing.status == 1 && missing.stderr.contains("an installed version of asr-xx to hold not found"), "\(missing.stderr)")
            let hold = try await daemon.earshotctl(["hold", "asr-en"])
            #expect(hold.status == 0 && hold.stdout.contains("held asr-en at version 1"), "\(hold.stdout)\(hold.stderr)")
            let again = try await daemon.earshotctl(["hold", "asr-en"])
            #expect(again.status == 2 && again.stdout.contains("already held at version 1"))
            #expect(try await daemon.earshotctl(["hold", "asr-en", "--dry-run"]).status == 64, "hold takes no --dry-run")

            let v2 = try await fixture.build(.random("asr-en", version: 2, locales: ["en-US"], bytes: 64 << 10, seed: 65))
            let de = try await fixture.build(.random("asr-de", version: 1, locales: ["de-DE"], bytes: 64 << 10, seed: 66))
            try await fixture.publishCatalog(version: 2, assets: [v2, de], modified: Date(timeIntervalSinceNow: -1800))
            let dry = try await daemon.earshotctl(["update", "--dry-run"])
            #expect(dry.stdout.contains("held asr-en at 1: would skip 2") && !dry.stdout.contains("would update"), "\(dry.stdout)")
            let skipped = try await daemon.earshotctl(["update", "--timer"])
            #expect(skipped.status == 0, "the catalog changed: \(skipped.stdout)\(skipped.stderr)")
            #expect(skipped.stdout.contains("held asr-en at 1: skipped 2") && !skipped.stdout.contains("updated asr-en"), "\(skipped.stdout)")
            #expect(try await daemon.earshotctl(["update"]).status == 2, "nothing to do while held")
            #expect(fixture.server.accessLog().filter { $0.path == v2.serverPath }.isEmpty, "no byte of v2 fetched")
            #expect(fixture.installedVersionDirectories("asr-en") == ["1"])
            #expect(daemon.child.stderr.contains("update of asr-en skipped: held at version 1 (2 available)"))

            // Listings say so: status (for admins) and catalog, with --json.
            let held = try JSONDecoder().decode(DaemonStatus.self, from: Data(try await daemon.earshotctl(["status", "--json"]).stdout.utf8))
            #expect(held.assets == [AssetVersionsInfo(id: "asr-en", installed: 1, available: 2, held: 1, previous: nil, previousKeptUntil: nil)])
            #expect(held.lastUpdate?.requestedBy == "uid \(getuid())" && held.lastUpdate?.outcome == "unchanged", "\(String(describing: held.lastUpdate))")
            #expect(try await daemon.earshotctl(["catalog"]).stdout.contains("version 1 (older), held at 1"))
            let catalog = try JSONDecoder().decode(CatalogReply.self, from: Data(try await daemon.earshotctl(["catalog", "--json"]).stdout.utf8))
            #expect(catalog.assets.first { $0.id == "asr-en" }?.heldVersion == 1)
            let rollback = try await daemon.earshotctl(["rollback", "asr-en"])
            #expect(rollback.status == 1)

            // install --dry-run: lists the fetch, fetches and reserves nothing (issue 9).
            let plan = try await daemon.earshotctl(["install", "--locale", "de-DE", "--dry-run"])
            #expect(plan.status == 0 && plan.stdout.contains("would install asr-de version 1: fetch "), "\(plan.stdout)\(plan.stderr)")
            let planJSON = try JSONDecoder().decode(InstallPlanReply.self, from: Data(try await daemon.earshotctl(["install", "--locale", "de-DE", "--dry-run", "--json"]).stdout.utf8))
            #expect(planJSON.planned == [InstallPlanInfo(asset: "asr-de", version: 1, downloadBytes: de.size, spaceNeeded: de.size + de.installedSize)])
            #expect(fixture.server.accessLog().filter { $0.path == de.serverPath }.isEmpty && fixture.installedVersionDirectories("asr-de").isEmpty)
            let reservations = try await daemon.earshotctl(["reservations", "--all", "--json"])
            #expect(!reservations.stdout.contains("de-DE"), "\(reservations.stdout)")
            #expect(try await daemon.earshotctl(["install", "--locale", "en-US", "--dry-run"]).status == 2, "already installed")

            // Unhold: the next (timer) update installs v2, logged once with who asked.
            let unhold = try await daemon.earshotctl(["unhold", "asr-en"])
            #expect(unhold.status == 0 && unhold.stdout.contains("released the hold on asr-en (version 1)"), "\(unhold.stdout)")
            #expect(try await daemon.earshotctl(["unhold", "asr-en"]).status == 2)
            let updated = try await daemon.earshotctl(["update", "--timer"])
            #expect(updated.status == 0 && updated.stdout.contains("updated asr-en@1→2"), "\(updated.stdout)\(updated.stderr)")
            let lines = daemon.child.stderr.split(separator: "\n").filter { $0.contains("updated asr-en 1 → 2") }
            #expect(lines.count == 1 && lines.first?.contains("earshotd[notice]: assets: updated asr-en 1 → 2 (by timer)") == true, "\(lines)")
            let after = try JSONDecoder().decode(DaemonStatus.self, from: Data(try await daemon.earshotctl(["status", "--json"]).stdout.utf8))
            let versions = try #require(after.assets?.first)
            #expect(versions.installed == 2 && versions.available == 2 && versions.held == nil && versions.previous == 1 && versions.previousKeptUntil != nil)
            #expect(after.lastUpdate?.requestedBy == "timer" && after.lastUpdate?.outcome == "changed" && after.lastUpdate?.summary == "updated asr-en@1→2")
            let text = try await daemon.earshotctl(["status"]).stdout
            #expect(text.contains("last update:") && text.contains("by timer: changed (updated asr-en@1→2)"), "\(text)")
            #expect(text.contains("ASSET") && text.contains("PREVIOUS"), "\(text)")
        }
    }

    /// Issue 9, defect 8: killing the CLI did not stop the update job while the unit's comment
    /// said TimeoutStartSec bounded it. Decided: the daemon's job runs on (the unit now says so);
    /// the next run joins the same job instead of starting another, and the change is logged once.
    @Test func killedUpdateClientLeavesTheJobRunningAndTheNextRunJoinsIt() async throws {
        try await AssetFixture.with { fixture in
            let v1 = try await fixture.build(.random("asr-en", version: 1, locales: ["en-US"], bytes: 64 << 10, seed: 67))
            try await fixture.publishCatalog(version: 1, assets: [v1], modified: Date(timeIntervalSinceNow: -3600))
            // v2 takes about 4 s at the update bandwidth cap.
            let daemon = try await fixture.startDaemonWithCatalog("[Assets]\nUpdateBandwidthLimit=262144")
            let admin = try TestConnection(daemon.socket)
            defer { admin.close() }
            try await admin.hello("org.example.kill")
            _ = try await admin.call(InstallRequest(id: "i", modules: [Modules.transcriber("en-US")]), timeout: .seconds(60)).decode(InstallReply.self)
            let v2 = try await fixture.build(.random("asr-en", version: 2, locales: ["en-US"], bytes: 1 << 20, seed: 68))
            try await fixture.publishCatalog(version: 2, assets: [v2], modified: Date(timeIntervalSinceNow: -1800))

            let first = try ChildProcess(BuiltProducts.path("earshotctl"), ["--socket", daemon.socket, "update", "--timer"], in: daemon.directory)
            try await waitForJob(admin) { !$0.isEmpty }
            first.signal(SIGKILL)
            _ = await first.wait()
            #expect(try await admin.call(AssetsRequest(id: "a1")).decode(AssetsReply.self).jobs.map(\.version) == [2], "the job runs on")

            let second = try await daemon.earshotctl(["update"])
            #expect(second.status == 0 && second.stdout.contains("updated asr-en@1→2"), "\(second.stdout)\(second.stderr)")
            #expect(fixture.server.accessLog().filter { $0.path == v2.serverPath }.count == 1, "one download, joined")
            let lines = daemon.child.stderr.split(separator: "\n").filter { $0.contains("updated asr-en 1 → 2") }
            #expect(lines.count == 1 && lines.first?.contains("(by timer)") == true, "logged once, by who started it: \(lines)")
        }
    }

    private func waitForJob(_ admin: TestConnection, timeout: Duration = .seconds(20), _ condition: ([InstallJobInfo]) -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if condition(try await admin.call(AssetsRequest(id: "poll")).decode(AssetsReply.self).jobs) { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw FixtureError("no matching install job within \(timeout)")
    }
}
