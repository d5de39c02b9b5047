@testable import EarshotAssets
import EarshotSystem
import EarshotWire
import Foundation
import Testing
import TestSupport

/// Installs through `AssetService`: auto-reservation, nothing-to-do, one shared job per asset with
/// progress to every waiter, verification failures that leave nothing behind, and cancellation
/// by releasing the last reservation with resume afterwards.
@Suite("Inventory: install")
struct InventoryInstallTests {
    @Test("install reserves, downloads, verifies, extracts and commits; a second install has nothing to do")
    func installsAndReserves() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        try await fixture.withService { handle async throws in
            let service = handle.service
            let progress = ProgressLog()
            let outcome = try await service.install([Modules.transcriber("en_US")], for: appA, progress: progress.record)
            #expect(outcome == InstallOutcome(nothingToDo: false, installed: ["tx-en@1"], reserved: ["en-US"]))
            #expect(try await service.reservations(of: appA).map(\.locale) == ["en-US"])

            // Files in place, byte for byte.
            let dir = fixture.assetsDirectory + "/tx-en/1"
            for (name, bytes) in StandardFiles.txEn {
                #expect(fixture.contents(dir + "/" + name) == bytes, "\(name)")
            }
            let installed = try await service.installedAssets()
            #expect(installed.count == 1)
            let asset = try #require(installed.first)
            #expect(asset.key == "tx-en@1")
            #expect(asset.path == dir)
            #expect(asset.bytes == 100_000)
            #expect(asset.current)
            #expect(asset.installedAt == fixture.clock.wallTime())
            #expect(asset.unneededSince == nil)
            // Staging and the download cache are empty again; no job is left.
            #expect(fixture.entries(fixture.stagingDirectory).isEmpty)
            #expect(fixture.entries(fixture.downloadsDirectory).isEmpty)
            #expect(await service.jobInfo().isEmpty)

            // Every phase reached the waiter, in order, ending with installed.
            let phases = progress.phases
            #expect(phases.last == .installed)
            var order = [InstallPhase.downloading, .verifying, .extracting, .committing, .installed][...]
            for phase in phases where phase == order.first { order.removeFirst() }
            #expect(order.isEmpty, "phases seen: \(phases)")
            #expect(progress.all.allSatisfy { $0.asset == "tx-en" && $0.version == 1 && $0.bytesTotal == asset.entry.size })

            // Installed: nothing to do, whoever asks and however the locale is spelled; a locale the
            // caller had not reserved yet (en-GB) is reserved, so GC keeps the asset for it too.
            let again = ProgressLog()
            let second = try await service.install([Modules.transcriber("en-US-u-ca-gregory"), Modules.transcriber("en-GB")], for: appA, progress: again.record)
            #expect(second == InstallOutcome(nothingToDo: true, installed: [], reserved: ["en-GB"]))
            #expect(again.all.isEmpty)
            #expect(try await service.status(of: [Modules.transcriber("en-GB")]).0 == .installed)
        }
    }

    @Test("a detector installs as a single file without reserving; a dictation locale reserves the catalog's tag")
    func detectorAndDictation() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        try await fixture.withService { handle async throws in
            let service = handle.service
            let detector = try await service.install([Modules.detector], for: appA) { _ in }
            #expect(detector == InstallOutcome(nothingToDo: false, installed: ["vad@1"], reserved: []))
            #expect(fixture.contents(fixture.assetsDirectory + "/vad/1/vad.onnx") == StandardFiles.vad)
            #expect(fixture.entries(fixture.assetsDirectory + "/vad/1") == ["vad.onnx"])
            #expect(try await service.reservations(of: appA).isEmpty)

            let dictation = try await service.install([Modules.dictation("fr-CA")], for: appB) { _ in }
            #expect(dictation == InstallOutcome(nothingToDo: false, installed: ["dict-fr@1"], reserved: ["fr"]))
            #expect(fixture.size(fixture.assetsDirectory + "/dict-fr/1/model/fr.dict") == 40_000)
            #expect(try await service.installedAssets().map(\.key) == ["dict-fr@1", "vad@1"])
        }
    }

    /// Ten clients ask for the same asset at once from a throttled nginx: exactly one download
    /// (access log), and every one of them sees progress and success.
    @Test("concurrent installs of one asset share one job and one download")
    func concurrentInstallsShareOneJob() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        // nginx lets the first second's worth through at once, then holds to the rate: ~1 s in all.
        let server = try await NginxServer.start(.init(rateLimit: "256k"))
        let archive = try await fixture.tarGz("tx-big", ["model.onnx": StandardFiles.bytes(512 << 10, seed: 30)])
        let url = try server.put("assets/tx-big.tar.gz", try #require(fixture.contents(archive)))
        let entry = try fixture.asset("tx-big", locales: ["en-US"], path: archive, files: ["model": "model.onnx"], urls: [url])
        try await fixture.publish(version: 1, [entry])

        // Progress of a real rate-limited transfer, paced by real time.
        try await fixture.withService(clock: SystemServiceClock()) { handle async throws in
            let service = handle.service
            let clients = (0..<10).map { ClientIdentity(uid: 2000 + UInt32($0), appID: "org.example.many") }
            let logs = clients.map { _ in ProgressLog() }
            let outcomes = try await withThrowingTaskGroup(of: InstallOutcome.self) { group in
                for (client, log) in zip(clients, logs) {
                    group.addTask { try await service.install([Modules.transcriber("en-US")], for: client, progress: log.record) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(outcomes.count == 10)
            #expect(outcomes.allSatisfy { $0 == InstallOutcome(nothingToDo: false, installed: ["tx-big@1"], reserved: ["en-US"]) })

            let requests = await server.accessLog(atLeast: 1).filter { $0.path == "/assets/tx-big.tar.gz" }
            #expect(requests.count == 1, "\(requests)")
            #expect(requests.first?.status == 200)
            #expect(requests.first?.range == nil)

            for (index, log) in logs.enumerated() {
                #expect(log.phases.last == .installed, "client \(index): \(log.phases)")
                #expect(log.all.contains { $0.phase == .downloading && $0.bytesDone > 0 && $0.bytesDone < entry.size }, "client \(index) saw no download progress")
                #expect(log.all.allSatisfy { $0.bytesTotal == entry.size })
            }
            #expect(try await service.reservations(of: nil).count == 10)
            #expect(try await service.installedAssets().map(\.key) == ["tx-big@1"])
            #expect(fixture.size(fixture.assetsDirectory + "/tx-big/1/model.onnx") == 512 << 10)
        }
    }

    @Test("a download whose SHA-256 differs from the catalog's is verificationFailed and leaves nothing")
    func wrongDigest() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        let archive = try await fixture.tarGz("tx-en", StandardFiles.txEn)
        let wrong = String(repeating: "0123456789abcdef", count: 4)
        let entry = try fixture.asset("tx-en", locales: ["en-US"], path: archive, files: ["encoder": "encoder.onnx"], sha256: wrong)
        try await fixture.publish(version: 1, [entry])
        try await fixture.withService { handle async throws in
            let service = handle.service
            let progress = ProgressLog()
            let error = await #expect(throws: AssetError.self) {
                try await service.install([Modules.transcriber("en-US")], for: appA, progress: progress.record)
            }
            #expect(error?.caseName == "verificationFailed", "\(String(describing: error))")
            #expect(progress.phases.last == .failed)
            try await expectNothingInstalled(fixture, service)
            #expect(fixture.entries(fixture.downloadsDirectory).isEmpty, "the bad download is discarded")
            #expect(try await service.status(of: [Modules.transcriber("en-US")]).0 == .supported)
        }
    }

    @Test("a hostile archive (a ../ member) is verificationFailed and leaves nothing behind")
    func hostileArchive() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        let archive = fixture.directory.file("src/hostile.tar.gz")
        try await ExtractFixture.python("dotdot", archive, in: fixture.directory)
        let entry = try fixture.asset("tx-evil", locales: ["en-US"], path: archive, files: ["model": "ok.txt"])
        try await fixture.publish(version: 1, [entry])
        try await fixture.withService { handle async throws in
            let service = handle.service
            let error = await #expect(throws: AssetError.self) { try await service.install([Modules.transcriber("en-US")], for: appA) { _ in } }
            #expect(error?.caseName == "verificationFailed", "\(String(describing: error))")
            #expect("\(String(describing: error))".contains("../evil"))
            try await expectNothingInstalled(fixture, service)
            #expect(fixture.entries(fixture.downloadsDirectory).isEmpty, "the rejected archive is not kept in the cache")
            // Nothing named `evil` anywhere: not in staging, not next to it, not above it.
            let all = FileManager.default.enumerator(atPath: fixture.directory.path)?.compactMap { $0 as? String } ?? []
            #expect(!all.contains { ($0 as NSString).lastPathComponent == "evil" }, "\(all)")
        }
    }

    /// A job keeps going when a waiter leaves and while any reservation needs the asset; releasing
    /// the last such reservation stops it, and the partial download stays in the cache. The next
    /// install resumes it with an HTTP range — here from the second mirror, the first (throttled,
    /// so the cancellation lands mid-transfer) having gone away meanwhile.
    @Test("releasing the last reservation cancels the job, keeps the partial file, and a later install resumes it")
    func releaseCancelsThenResume() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        let throttled = try await NginxServer.start(.init(rateLimit: "128k"))
        let fast = try await NginxServer.start()
        let data = StandardFiles.bytes(640 << 10, seed: 31)
        let archive = try await fixture.tarGz("tx-slow", ["model.onnx": data])
        let bytes = try #require(fixture.contents(archive))
        // The same file on both (same mtime and size, so the same ETag for If-Range).
        let modified = Date(timeIntervalSince1970: 1_700_000_000)
        let urls = [try throttled.put("assets/tx-slow.tar.gz", bytes, modified: modified), try fast.put("assets/tx-slow.tar.gz", bytes, modified: modified)]
        let entry = try fixture.asset("tx-slow", locales: ["en-US"], path: archive, files: ["model": "model.onnx"], urls: urls)
        try await fixture.publish(version: 1, [entry])
        let partial = fixture.downloadsDirectory + "/" + entry.sha256

        // Progress of a real rate-limited transfer, paced by real time.
        try await fixture.withService(clock: SystemServiceClock()) { handle async throws in
            let service = handle.service
            let english = Modules.transcriber("en-US")
            let (logA, logB) = (ProgressLog(), ProgressLog())
            let waiterA = Task { try await service.install([english], for: appA, progress: logA.record) }
            let waiterB = Task { try await service.install([english], for: appB, progress: logB.record) }
            #expect(try await eventually { try await service.reservations(of: nil).count == 2 && logB.maxBytesDone > 0 && logA.maxBytesDone > 0 })
            #expect(await service.jobInfo().map(\.asset) == ["tx-slow"])

            // B goes away, then gives up its reservation: A's reservation keeps the job going.
            waiterB.cancel()
            let gone = await #expect(throws: (any Error).self) { try await waiterB.value }
            #expect(gone is CancellationError, "\(String(describing: gone))")
            #expect(try await service.release("en-US", for: appB))
            let mark = logA.maxBytesDone
            #expect(await eventually { logA.maxBytesDone > mark + (16 << 10) }, "the job goes on")
            #expect(try await service.status(of: [english]).0 == .downloading)

            // A releases the last reservation: the job stops.
            #expect(try await service.release("en-US", for: appA))
            let error = await #expect(throws: AssetError.self) { try await waiterA.value }
            #expect(error?.caseName == "cancelled", "\(String(describing: error))")
            #expect(logA.phases.last == .cancelled)
            #expect(await service.jobInfo().isEmpty)
            #expect(try await service.status(of: [english]).0 == .supported)
            // The partial file and its sidecar stay for a resume; nothing is installed.
            let kept = try #require(fixture.size(partial))
            #expect(kept > mark && kept < entry.size, "kept \(kept) of \(entry.size)")
            #expect(fixture.exists(partial + ".meta"))
            #expect(fixture.entries(fixture.assetsDirectory).isEmpty)
            #expect(fixture.entries(fixture.stagingDirectory).isEmpty)
            #expect(try await service.installedAssets().isEmpty)

            // Later, with the first mirror gone: the install resumes from the second.
            await throttled.stop()
            let resumed = ProgressLog()
            let outcome = try await service.install([english], for: appA, progress: resumed.record)
            #expect(outcome == InstallOutcome(nothingToDo: false, installed: ["tx-slow@1"], reserved: ["en-US"]))
            #expect(resumed.all.first { $0.phase == .downloading }?.bytesDone == kept, "progress starts from the partial file")
            #expect(fixture.contents(fixture.assetsDirectory + "/tx-slow/1/model.onnx") == data)
            #expect(fixture.entries(fixture.downloadsDirectory).isEmpty)

            let first = throttled.accessLog().filter { $0.path == "/assets/tx-slow.tar.gz" }
            #expect(first.count == 1 && first.first?.range == nil, "\(first)")
            let second = await fast.accessLog(atLeast: 1).filter { $0.path == "/assets/tx-slow.tar.gz" }
            #expect(second.count == 1, "\(second)")
            #expect(second.first?.range == "bytes=\(kept)-")
            #expect(second.first?.status == 206)
            #expect(second.first?.bodyBytesSent == entry.size - kept)
        }
    }

    /// Nothing recorded, nothing in `state/assets` or staging, no job.
    func expectNothingInstalled(_ fixture: InventoryFixture, _ service: AssetService, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        #expect(try await service.installedAssets().isEmpty, sourceLocation: sourceLocation)
        #expect(fixture.entries(fixture.assetsDirectory).isEmpty, "\(fixture.entries(fixture.assetsDirectory))", sourceLocation: sourceLocation)
        #expect(fixture.entries(fixture.stagingDirectory).isEmpty, "\(fixture.entries(fixture.stagingDirectory))", sourceLocation: sourceLocation)
        #expect(await service.jobInfo().isEmpty, sourceLocation: sourceLocation)
    }

    /// Progress throttling read `DispatchTime` whatever clock the service had; it follows the
    /// injected clock now.
    @Test("byte-count progress is throttled on the injected clock; phase changes pass at once")
    func progressThrottlingFollowsTheManualClock() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        let entry = try await fixture.standardAssets()[0]
        let clock = ManualClock()
        let job = InstallJob(entry: entry, bandwidthLimit: nil, isUpdate: false, requestedBy: "test", clock: clock)
        let log = ProgressLog()
        _ = job.addSink(log.record)
        job.publish(.downloading, bytesDone: 1)
        job.publish(.downloading, bytesDone: 2)
        clock.advance(by: InstallJob.progressInterval - .nanoseconds(1))
        job.publish(.downloading, bytesDone: 3)
        #expect(log.all.map(\.bytesDone) == [0, 1], "nothing new within the interval")
        clock.advance(by: .nanoseconds(1))
        job.publish(.downloading, bytesDone: 4)
        job.publish(.verifying, bytesDone: 5)
        #expect(log.all.map(\.bytesDone) == [0, 1, 4, 5])
        #expect(log.phases == [.queued, .downloading, .downloading, .verifying])
    }
}
