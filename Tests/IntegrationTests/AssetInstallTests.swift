import EarshotSystem
import EarshotWire
import Foundation
import Testing
import TestSupport

/// Installs through the real earshotd from a real nginx: shared jobs, status, locales, updates.
@Suite struct AssetInstallTests {
    @Test func tenClientsInstallingTheSameModuleShareOneDownloadAndAllSeeProgress() async throws {
        // 3 MiB at 2 MiB/s: the transfer takes ~1.5 s, so every client joins the running job.
        try await AssetFixture.with(rateLimit: "2m") { fixture in
            let en = try await fixture.build(.random("asr-en", locales: ["en-US"], bytes: 3 << 20, seed: 10))
            try await fixture.publishCatalog(version: 1, assets: [en])
            let daemon = try await fixture.startDaemonWithCatalog()
            var clients: [TestConnection] = []
            for index in 0..<10 {
                let client = try TestConnection(daemon.socket)
                try await client.hello("org.example.client\(index)")
                clients.append(client)
            }
            let observer = try TestConnection(daemon.socket)
            try await observer.hello("org.example.observer")
            defer { (clients + [observer]).forEach { $0.close() } }

            let results = try await withThrowingTaskGroup(of: (Int, [InstallProgress], Frame).self) { group in
                for (index, client) in clients.enumerated() {
                    group.addTask {
                        let (progress, reply) = try await client.exchange(InstallRequest(id: "install-\(index)", modules: [Modules.transcriber("en-US")]), timeout: .seconds(60))
                        return (index, progress, reply)
                    }
                }
                // Meanwhile another client sees the module as downloading.
                var sawDownloading = false
                for attempt in 0..<50 where !sawDownloading {
                    let status = try await observer.call(ModuleStatusRequest(id: "status-\(attempt)", modules: [Modules.transcriber("en-US")])).decode(ModuleStatusReply.self)
                    sawDownloading = status.status == .downloading
                    if !sawDownloading { try await Task.sleep(for: .milliseconds(20)) }
                }
                #expect(sawDownloading, "module-status never reported downloading during the shared install")
                var all: [(Int, [InstallProgress], Frame)] = []
                for try await result in group { all.append(result) }
                return all.sorted { $0.0 < $1.0 }
            }

            #expect(results.count == 10)
            for (index, progress, reply) in results {
                let outcome = try reply.decode(InstallReply.self)
                #expect(outcome.id == "install-\(index)")
                #expect(!outcome.nothingToDo)
                #expect(outcome.installed == ["asr-en@1"])
                #expect(outcome.reserved == ["en-US"])
                #expect(!progress.isEmpty, "client \(index) saw no progress")
                #expect(progress.allSatisfy { $0.asset == "asr-en" && $0.version == 1 && $0.bytesTotal == en.size && $0.id == "install-\(index)" })
                #expect(progress.last?.phase == .installed, "client \(index): last phase \(String(describing: progress.last?.phase))")
                let done = progress.filter { $0.phase == .downloading }.map(\.bytesDone)
                #expect(done == done.sorted(), "client \(index): download progress went backwards")
            }
            // Progress is shared: clients that joined mid-transfer saw partial byte counts.
            let partial = results.flatMap(\.1).filter { $0.phase == .downloading && $0.bytesDone > 0 && $0.bytesDone < en.size }
            #expect(!partial.isEmpty)

            let gets = await fixture.requests(for: en)
            #expect(gets.count == 1, "expected exactly one download, got \(gets.map(\.request))")
            #expect(gets.first?.method == "GET")
            #expect(gets.first?.status == 200)
            #expect(gets.first?.bodyBytesSent == en.size)

            let assets = try await observer.call(AssetsRequest(id: "assets")).decode(AssetsReply.self)
            #expect(assets.assets.map { "\($0.id)@\($0.version)" } == ["asr-en@1"])
            #expect(assets.jobs.isEmpty)
            if let installed = assets.assets.first {
                #expect(installed.current && installed.reserved)
                #expect(fixture.contentProblems(en, at: installed.path).isEmpty)
            }
            let all = try await observer.call(ReservationsRequest(id: "r", all: true)).decode(ReservationsReply.self)
            #expect(Set(all.reservations.map(\.appId)) == Set((0..<10).map { "org.example.client\($0)" }))
        }
    }

    @Test func jobOutlivesItsRequesterAndCancelKeepsThePartialForResume() async throws {
        // 2 MiB at 512 KiB/s (nginx sends the first second's worth at once, then paces the rest).
        try await AssetFixture.with(rateLimit: "512k") { fixture in
            let en = try await fixture.build(.random("asr-en", locales: ["en-US"], bytes: 2 << 20, seed: 15))
            try await fixture.publishCatalog(version: 1, assets: [en])
            let daemon = try await fixture.startDaemonWithCatalog()
            let admin = try TestConnection(daemon.socket)
            defer { admin.close() }
            try await admin.hello("org.example.admin")

            // The requester goes away mid-download; its reservation still needs the asset.
            let requester = try TestConnection(daemon.socket)
            try await requester.hello("org.example.leaver")
            try await requester.send(InstallRequest(id: "i", modules: [Modules.transcriber("en-US")]))
            while true {
                let frame = try #require(try await requester.next())
                if let progress = try? frame.decode(InstallProgress.self), progress.phase == .downloading, progress.bytesDone >= 640 << 10 { break }
            }
            requester.close()
            try await Task.sleep(for: .milliseconds(300))
            let running = try await admin.call(AssetsRequest(id: "a1")).decode(AssetsReply.self)
            #expect(running.jobs.map(\.asset) == ["asr-en"], "the job stopped when its requester left")
            #expect(try await admin.call(ModuleStatusRequest(id: "s1", modules: [Modules.transcriber("en-US")])).decode(ModuleStatusReply.self).status == .downloading)

            // An admin cancels it: the job ends, the partial download stays.
            #expect(try await admin.call(CancelInstallRequest(id: "c", asset: "asr-en")).decode(CancelInstallReply.self).cancelled)
            var jobs = [InstallJobInfo(asset: "asr-en", version: 1)]
            for attempt in 0..<100 where !jobs.isEmpty {
                try await Task.sleep(for: .milliseconds(20))
                jobs = try await admin.call(AssetsRequest(id: "a\(attempt + 2)")).decode(AssetsReply.self).jobs
            }
            #expect(jobs.isEmpty, "cancel did not stop the job")
            #expect(try await admin.call(ModuleStatusRequest(id: "s2", modules: [Modules.transcriber("en-US")])).decode(ModuleStatusReply.self).status == .supported)
            let partialPath = fixture.cacheDirectory + "/downloads/" + en.sha256
            let partial = Int64((try? FileManager.default.attributesOfItem(atPath: partialPath))?[.size] as? Int ?? 0)
            #expect(partial > 0 && partial < en.size, "partial download has \(partial) of \(en.size) bytes")

            // Installing again resumes from the partial file.
            let reply = try await admin.call(InstallRequest(id: "i2", modules: [Modules.transcriber("en-US")]), timeout: .seconds(60)).decode(InstallReply.self)
            #expect(reply.installed == ["asr-en@1"])
            let gets = await fixture.requests(for: en, atLeast: 2)
            #expect(gets.count == 2, "\(gets.map { "\($0.status) \($0.range ?? "-")" })")
            if gets.count == 2 {
                #expect(gets[1].status == 206)
                #expect(gets[1].range == "bytes=\(partial)-")
            }
            let assets = try await admin.call(AssetsRequest(id: "a")).decode(AssetsReply.self)
            if let installed = assets.assets.first {
                #expect(fixture.contentProblems(en, at: installed.path).isEmpty)
            }
        }
    }

    @Test func statusLocalesAndNothingToDoFollowTheInstall() async throws {
        try await AssetFixture.with { fixture in
            let en = try await fixture.build(.random("asr-en", locales: ["en-US", "en-GB"], bytes: 256 << 10, seed: 20))
            let de = try await fixture.build(.random("asr-de", locales: ["de-DE"], bytes: 256 << 10, seed: 21))
            try await fixture.publishCatalog(version: 1, assets: [en, de])
            let daemon = try await fixture.startDaemonWithCatalog()
            let client = try TestConnection(daemon.socket)
            defer { client.close() }
            try await client.hello("org.example.status")

            func status(_ locales: [String]) async throws -> ModuleStatusReply {
                try await client.call(ModuleStatusRequest(id: "s", modules: locales.map(Modules.transcriber))).decode(ModuleStatusReply.self)
            }
            func locales(installed: Bool = false, kind: AssetKind = .transcriber, equivalentTo: String? = nil) async throws -> [String] {
                try await client.call(LocalesRequest(id: "l", kind: kind, installed: installed, equivalentTo: equivalentTo)).decode(LocalesReply.self).locales
            }

            #expect(try await status(["en-US"]).status == .supported)
            #expect(try await status(["en_US"]).status == .supported) // BCP-47 equivalence, not string equality
            #expect(try await status(["fr-FR"]).status == .unsupported)
            let mixed = try await status(["en-US", "fr-FR"])
            #expect(mixed.status == .unsupported)
            #expect(mixed.modules == [.supported, .unsupported])
            #expect(try await locales() == ["de-DE", "en-GB", "en-US"])
            #expect(try await locales(installed: true) == [])
            #expect(try await locales(equivalentTo: "en_US") == ["en-US"])
            #expect(try await locales(equivalentTo: "fr-FR") == [])
            #expect(try await locales(kind: .detector) == [])

            let (progress, reply) = try await client.exchange(InstallRequest(id: "i1", modules: [Modules.transcriber("en-US")]))
            let first = try reply.decode(InstallReply.self)
            #expect(!first.nothingToDo)
            #expect(first.installed == ["asr-en@1"])
            #expect(first.reserved == ["en-US"])
            #expect(Set(progress.map(\.phase)).isSuperset(of: [.downloading, .verifying, .extracting, .committing, .installed]))

            #expect(try await status(["en-US"]).status == .installed)
            #expect(try await status(["en-GB"]).status == .installed) // the same asset serves it
            let partlyInstalled = try await status(["en-US", "de-DE"])
            #expect(partlyInstalled.status == .supported)
            #expect(partlyInstalled.modules == [.installed, .supported])
            #expect(try await locales(installed: true) == ["en-GB", "en-US"])

            let (againProgress, againReply) = try await client.exchange(InstallRequest(id: "i2", modules: [Modules.transcriber("en_US")]))
            let again = try againReply.decode(InstallReply.self)
            #expect(again.nothingToDo)
            #expect(again.installed.isEmpty && again.reserved.isEmpty)
            #expect(againProgress.isEmpty)

            let unsupported = try await client.call(InstallRequest(id: "i3", modules: [Modules.transcriber("fr-FR")]))
            #expect(unsupported.errorCode == .unsupportedLocale, "\(unsupported)")

            let gets = fixture.server.accessLog().filter { $0.path == en.serverPath }
            #expect(gets.count == 1)
            #expect(fixture.server.accessLog().filter { $0.path == de.serverPath }.isEmpty)
        }
    }

    @Test func updateInstallsTheNewVersionSwitchesAndRetiresTheOld() async throws {
        try await AssetFixture.with { fixture in
            let v1 = try await fixture.build(.random("asr-en", version: 1, locales: ["en-US"], bytes: 512 << 10, seed: 30))
            try await fixture.publishCatalog(version: 1, assets: [v1], modified: Date(timeIntervalSinceNow: -3600))
            let daemon = try await fixture.startDaemonWithCatalog()
            let admin = try TestConnection(daemon.socket)
            defer { admin.close() }
            try await admin.hello("org.example.update")
            let installed = try await admin.call(InstallRequest(id: "i", modules: [Modules.transcriber("en-US")]), timeout: .seconds(60)).decode(InstallReply.self)
            #expect(installed.installed == ["asr-en@1"])

            // Nothing newer yet.
            let idle = try await admin.call(UpdateRequest(id: "u0")).decode(UpdateReply.self)
            #expect(!idle.changed)
            #expect(idle.updated.isEmpty)

            let v2 = try await fixture.build(.random("asr-en", version: 2, locales: ["en-US"], bytes: 512 << 10, seed: 31))
            try await fixture.publishCatalog(version: 2, assets: [v2])
            let update = try await admin.call(UpdateRequest(id: "u1"), timeout: .seconds(60)).decode(UpdateReply.self)
            #expect(update.changed)
            #expect(update.updated == ["asr-en@1→2"])
            #expect(update.failed.isEmpty)
            #expect(update.catalogs.map(\.outcome) == ["updated"])
            #expect(update.catalogs.first?.version == 2)

            let assets = try await admin.call(AssetsRequest(id: "a")).decode(AssetsReply.self)
            let current = assets.assets.filter(\.current)
            #expect(current.map { "\($0.id)@\($0.version)" } == ["asr-en@2"])
            // Nobody leases v1; it stays as the rollback target for KeepPreviousForSec.
            #expect(assets.assets.map(\.version) == [1, 2])
            #expect(fixture.installedVersionDirectories("asr-en") == ["1", "2"])
            if let path = current.first?.path {
                #expect(fixture.contentProblems(v2, at: path).isEmpty)
            }
            #expect(try await admin.call(ModuleStatusRequest(id: "s", modules: [Modules.transcriber("en-US")])).decode(ModuleStatusReply.self).status == .installed)
            #expect(try await admin.call(InstallRequest(id: "i2", modules: [Modules.transcriber("en-US")])).decode(InstallReply.self).nothingToDo)

            let again = try await admin.call(UpdateRequest(id: "u2")).decode(UpdateReply.self)
            #expect(!again.changed)
            #expect(again.updated.isEmpty && again.failed.isEmpty)
            #expect(again.catalogs.map(\.outcome) == ["unchanged"])
            #expect(fixture.server.accessLog().filter { $0.path == v2.serverPath }.count == 1)
        }
    }
}
