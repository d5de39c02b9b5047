@testable import EarshotAssets
import EarshotSystem
import EarshotWire
import Foundation
import Testing
import TestSupport

/// A site behind a pull-through cache: one upstream registry, one Distribution instance in proxy
/// mode in front of it, and ten daemons (each with its own state and cache directories) installing
/// the same asset through the cache.
@Suite("Registry: a fleet behind a pull-through cache", .serialized)
struct RegistryFleetTests {
    /// Adds a 4 MiB transcriber asset for `locale` to the catalog (raising its version) and
    /// publishes the catalog and every asset to `upstream` (assets it has are skipped).
    private func publishAsset(_ fixture: RegistryFixture, to upstream: RegistryServer, id: String, locale: String, seed: UInt64) async throws -> CatalogAsset {
        let archive = try await fixture.inventory.tarGz(id, ["model.onnx": NginxServer.seededBytes(count: 4 << 20, seed: seed)])
        let asset = try fixture.inventory.asset(id, locales: [locale], path: archive, files: ["model": "model.onnx"])
        let current = try Catalog.parse(Data(contentsOf: URL(fileURLWithPath: fixture.inventory.catalogPath)))
        try await fixture.inventory.publish(version: current.version + 1, current.assets + [asset])
        let publisher = try await fixture.publisher()
        _ = try await publisher.service.publish(to: try OCIReference.parse("oci://\(upstream.authority)/earshot/catalog:v1"), dryRun: false)
        await publisher.stop()
        return asset
    }

    @Test("ten daemons install through the cache: the upstream's blob GETs do not grow with the fleet when arrivals are spread")
    func tenDaemonsThroughOneCache() async throws {
        let fixture = try await RegistryFixture.make()
        defer { fixture.remove() }
        let upstream = try await RegistryServer.start()
        let big = try await publishAsset(fixture, to: upstream, id: "tx-big", locale: "it-IT", seed: 7)
        try fixture.removeOriginalSources()
        let cache = try await RegistryServer.start(.proxy(upstream: upstream.baseURL))
        let source = "oci://\(cache.authority)/earshot/catalog:v1"
        let digest = "sha256:" + big.sha256

        var seconds: [Double] = []
        var upstreamAfterFirst = 0
        for index in 0..<10 {
            let daemon = try await fixture.service("daemon-\(index)", catalogs: [source])
            #expect(await daemon.service.refreshCatalogs().first?.version != nil)
            daemon.startRunning()
            let started = ContinuousClock.now
            let outcome = try await daemon.service.install([Modules.transcriber("it-IT")], for: appA) { _ in }
            seconds.append(Self.seconds(ContinuousClock.now - started))
            #expect(outcome.installed.contains("tx-big@1"))
            await daemon.stop()
            // Arrivals spread as earshot-update.timer's RandomizedDelaySec spreads a fleet: hours,
            // far longer than the cache takes to store what it fetched.
            let deadline = ContinuousClock.now + .seconds(10)
            while !cache.stores(digest), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
            if index == 0 { upstreamAfterFirst = upstream.blobGets(digest) }
        }
        let upstreamGets = upstream.blobGets(digest)
        // Distribution 2.8's proxy fetches a blob it does not have more than once for that first
        // request (to answer it and, separately, to store it): a constant per blob and site.
        #expect(upstreamAfterFirst >= 1)
        #expect(upstreamGets == upstreamAfterFirst, "daemons 2–10 were served from the cache alone")
        #expect(cache.blobGets(digest) == 10)
        // The baseline: the same ten daemons straight from the upstream, no cache.
        var direct: [Double] = []
        for index in 0..<10 {
            let daemon = try await fixture.service("direct-\(index)", catalogs: ["oci://\(upstream.authority)/earshot/catalog:v1"])
            _ = await daemon.service.refreshCatalogs()
            daemon.startRunning()
            let started = ContinuousClock.now
            #expect(try await daemon.service.install([Modules.transcriber("it-IT")], for: appA) { _ in }.installed.contains("tx-big@1"))
            direct.append(Self.seconds(ContinuousClock.now - started))
            await daemon.stop()
        }
        let directGets = upstream.blobGets(digest) - upstreamGets
        #expect(directGets == 10)
        let rest = seconds.dropFirst().sorted()
        print("fleet: 10 daemons spread, \(big.size) byte asset; upstream blob GETs through the cache \(upstreamGets) (all from the first daemon), "
              + "without it \(directGets) (ratio \(String(format: "%.2f", Double(upstreamGets) / Double(directGets)))); cache blob GETs \(cache.blobGets(digest)); "
              + "install seconds through the cache: first \(String(format: "%.3f", seconds[0])), others median \(String(format: "%.3f", rest[rest.count / 2])), "
              + "max \(String(format: "%.3f", rest.last ?? 0)); straight from the upstream: median \(String(format: "%.3f", direct.sorted()[5]))")

        // Ten at once: requests that reach the cache while it is still fetching are passed through
        // to the upstream each (Distribution 2.8); the figure is reported, what must hold is that all install.
        let fresh = try await publishAsset(fixture, to: upstream, id: "tx-burst", locale: "pt-PT", seed: 8)
        let together = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<10 {
                group.addTask {
                    let daemon = try await fixture.service("burst-\(index)", catalogs: [source])
                    _ = await daemon.service.refreshCatalogs()
                    daemon.startRunning()
                    let outcome = try await daemon.service.install([Modules.transcriber("pt-PT")], for: appA) { _ in }
                    await daemon.stop()
                    return outcome.installed.contains("tx-burst@1")
                }
            }
            var all = true
            for try await installed in group { all = all && installed }
            return all
        }
        #expect(together)
        print("fleet: 10 daemons at once; upstream blob GETs \(upstream.blobGets("sha256:" + fresh.sha256)), cache blob GETs \(cache.blobGets("sha256:" + fresh.sha256))")
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    @Test("the cache vanishing mid-download: the install falls back to the catalog's own URL and completes")
    func vanishingCacheFallsBack() async throws {
        let fixture = try await RegistryFixture.make()
        defer { fixture.remove() }
        let upstream = try await RegistryServer.start()
        let big = try await publishAsset(fixture, to: upstream, id: "tx-big", locale: "it-IT", seed: 7)
        let cache = try await RegistryServer.start(.proxy(upstream: upstream.baseURL))
        var slow = DownloadOptions.hostile
        slow.maxBytesPerSecond = 1 << 20
        let daemon = try await fixture.service("daemon", catalogs: ["oci://\(cache.authority)/earshot/catalog:v1"], download: slow)
        #expect(await daemon.service.refreshCatalogs().first?.version != nil)
        daemon.startRunning()
        let progress = ProgressLog()
        let install = Task { try await daemon.service.install([Modules.transcriber("it-IT")], for: appA, progress: progress.record) }
        let deadline = ContinuousClock.now + .seconds(20)
        while progress.maxBytesDone < 512 << 10, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(progress.maxBytesDone >= 512 << 10 && progress.maxBytesDone < big.size, "the download was under way when the cache went")
        await cache.kill()
        let outcome = try await install.value
        #expect(outcome.installed.contains("tx-big@1"))
        await daemon.stop()
    }

    @Test("a blob download stopped by a daemon restart resumes with a Range request to the registry")
    func resumesAcrossARestart() async throws {
        let fixture = try await RegistryFixture.make()
        defer { fixture.remove() }
        let registry = try await RegistryServer.start()
        let big = try await publishAsset(fixture, to: registry, id: "tx-big", locale: "it-IT", seed: 7)
        try fixture.removeOriginalSources()
        var slow = DownloadOptions.hostile
        slow.maxBytesPerSecond = 2 << 20
        let source = "oci://\(registry.authority)/earshot/catalog:v1"
        let first = try await fixture.service("daemon", catalogs: [source], download: slow)
        #expect(await first.service.refreshCatalogs().first?.version != nil)
        first.startRunning()
        let progress = ProgressLog()
        let install = Task { try await first.service.install([Modules.transcriber("it-IT")], for: appA, progress: progress.record) }
        #expect(await eventually { progress.maxBytesDone >= 1 << 20 })
        await first.stop()
        _ = try? await install.value

        let second = try await fixture.service("daemon", catalogs: [source])
        second.startRunning()
        #expect(try await eventually(timeout: .seconds(30)) { try await second.service.installedAssets().contains { $0.key == "tx-big@1" } })
        await second.stop()
        let gets = registry.requests().filter { $0.method == "GET" && $0.path.hasSuffix(big.sha256) }
        #expect(gets.map(\.status) == [200, 206], "\(gets)")
        #expect(gets.last.map { $0.bytes < big.size } == true, "only the rest was sent again")
    }
}
