import EarshotSystem
import EarshotWire
import Foundation
import Testing
import TestSupport

/// Crash safety: earshotd SIGKILLed in each install phase, restarted on the same state and cache
/// dirs: the store is consistent, staging is clean and the install completes.
@Suite(.serialized) struct AssetCrashTests {
    @Test(arguments: [InstallPhase.downloading, .verifying, .extracting, .committing])
    func killedInPhaseRestartsConsistentAndCompletes(_ phase: InstallPhase) async throws {
        try await AssetFixture.with { fixture in
            let en = try await fixture.build(.random("asr-en", locales: ["en-US"], bytes: 1 << 20, seed: 60))
            try await fixture.publishCatalog(version: 1, assets: [en])
            let first = try await fixture.startDaemonWithCatalog(environment: ["EARSHOT_TEST_PAUSE": "\(phase.rawValue):30"])
            let client = try TestConnection(first.socket)
            try await client.hello("org.example.crash")
            try await client.send(InstallRequest(id: "i", modules: [Modules.transcriber("en-US")]))
            try await waitForProgress(client) { $0.phase == phase }
            try await first.waitForLog("test pause: \(phase.rawValue)")
            let stagingAtKill = fixture.stagingEntries
            await fixture.kill(first)
            client.close()

            switch phase {
            case .downloading:
                #expect(fixture.server.accessLog().filter { $0.path == en.serverPath }.isEmpty)
            case .committing:
                // The extracted tree waits in staging, not yet renamed into place.
                #expect(stagingAtKill.count == 1)
                #expect(fixture.installedVersionDirectories("asr-en").isEmpty)
            default:
                #expect(stagingAtKill.isEmpty)
            }

            let second = try await fixture.startDaemon()
            let admin = try TestConnection(second.socket)
            defer { admin.close() }
            // Right after the restart: nothing, or the complete asset — never a half-installed one.
            let early = try await admin.call(AssetsRequest(id: "a0")).decode(AssetsReply.self)
            #expect(early.assets.count <= 1)
            for asset in early.assets {
                #expect(asset.id == "asr-en" && asset.version == 1 && asset.current)
                #expect(fixture.contentProblems(en, at: asset.path).isEmpty)
            }

            try await admin.hello("org.example.crash")
            let reply = try await admin.call(InstallRequest(id: "i2", modules: [Modules.transcriber("en-US")]), timeout: .seconds(60))
            let outcome = try reply.decode(InstallReply.self)
            #expect(outcome.nothingToDo || outcome.installed == ["asr-en@1"], "\(outcome)")
            try await expectConsistentStore(fixture, admin, en)
            #expect(second.child.stderr.contains("resuming install of asr-en@1"))
            // Phases after the download reuse the complete file: one GET in all.
            let gets = fixture.server.accessLog().filter { $0.path == en.serverPath }
            #expect(gets.count == 1, "\(gets.map(\.request))")
        }
    }

    @Test func downloadKilledMidTransferResumesWithARangeRequest() async throws {
        // 4 MiB at 2 MiB/s; the daemon is killed once it has reported at least 1 MiB.
        try await AssetFixture.with(rateLimit: "2m") { fixture in
            let en = try await fixture.build(.random("asr-en", locales: ["en-US"], bytes: 4 << 20, seed: 61))
            try await fixture.publishCatalog(version: 1, assets: [en])
            let first = try await fixture.startDaemonWithCatalog()
            let client = try TestConnection(first.socket)
            try await client.hello("org.example.resume")
            try await client.send(InstallRequest(id: "i", modules: [Modules.transcriber("en-US")]))
            try await waitForProgress(client) { $0.phase == .downloading && $0.bytesDone >= 1 << 20 }
            await fixture.kill(first)
            client.close()

            let partialPath = fixture.cacheDirectory + "/downloads/" + en.sha256
            let partial = Int64((try? FileManager.default.attributesOfItem(atPath: partialPath))?[.size] as? Int ?? 0)
            #expect(partial >= 1 << 20 && partial < en.size, "partial file has \(partial) of \(en.size) bytes")
            // nginx logs the cut request once it notices the client is gone.
            #expect(await fixture.requests(for: en).count == 1)

            let second = try await fixture.startDaemon()
            let admin = try TestConnection(second.socket)
            defer { admin.close() }
            try await admin.hello("org.example.resume")
            let reply = try await admin.call(InstallRequest(id: "i2", modules: [Modules.transcriber("en-US")]), timeout: .seconds(60))
            let outcome = try reply.decode(InstallReply.self)
            #expect(outcome.nothingToDo || outcome.installed == ["asr-en@1"], "\(outcome)")
            try await expectConsistentStore(fixture, admin, en)

            let gets = await fixture.requests(for: en, atLeast: 2).filter { $0.method == "GET" }
            try #require(gets.count == 2, "\(gets.map { "\($0.status) \($0.range ?? "-") \($0.bodyBytesSent)" })")
            let resumed = gets[1]
            #expect(resumed.status == 206)
            let range = try #require(resumed.range)
            let start = try #require(range.hasPrefix("bytes=") && range.hasSuffix("-") ? Int64(range.dropFirst(6).dropLast()) : nil, "Range \(range)")
            #expect(start > 0 && start <= partial)
            #expect(resumed.bodyBytesSent == en.size - start)
            let remainder = en.size - partial
            #expect(resumed.bodyBytesSent - remainder < 1 << 20, "fetched \(resumed.bodyBytesSent) bytes again for a remainder of \(remainder)")
        }
    }

    // MARK: Helpers

    /// Reads frames until a progress event satisfies `condition`.
    private func waitForProgress(_ client: TestConnection, timeout: Duration = .seconds(30), _ condition: (InstallProgress) -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            guard let frame = try await client.next(timeout: deadline - ContinuousClock.now) else { throw FixtureError("connection closed") }
            if frame.type == InstallProgress.eventType, condition(try frame.decode(InstallProgress.self)) { return }
            if frame.type != InstallProgress.eventType { throw FixtureError("unexpected \(frame.type): \(frame.data)") }
        }
        throw FixtureError("no matching progress within \(timeout)")
    }

    /// After a completed install: one current version with the right bytes, no staging leftovers,
    /// no partial downloads, nothing unrecorded on disk (GC, which refuses inconsistent state, runs).
    private func expectConsistentStore(_ fixture: AssetFixture, _ admin: TestConnection, _ asset: BuiltAsset) async throws {
        let assets = try await admin.call(AssetsRequest(id: "a")).decode(AssetsReply.self)
        #expect(assets.assets.map { "\($0.id)@\($0.version)" } == [asset.key])
        #expect(assets.jobs.isEmpty)
        if let installed = assets.assets.first {
            #expect(installed.current)
            #expect(installed.bytes == asset.contentBytes)
            #expect(fixture.contentProblems(asset, at: installed.path).isEmpty)
        }
        #expect(fixture.installedVersionDirectories(asset.spec.id) == ["\(asset.spec.version)"])
        #expect(fixture.stagingEntries.isEmpty, "staging leftovers: \(fixture.stagingEntries)")
        #expect(fixture.downloadEntries.isEmpty, "download leftovers: \(fixture.downloadEntries)")
        let gc = try await admin.call(GCRequest(id: "gc", dryRun: true))
        #expect(gc.type == GCReply.eventType, "GC refused: \(gc.errorText ?? "")")
    }
}
