@testable import EarshotAssets
import EarshotSystem
import EarshotWire
import Foundation
import Testing
import TestSupport

/// A daemon's downloads from registries when things go wrong: a pull-through cache that vanishes
/// mid-download, a restart mid-download. (Ten real daemons behind one cache: `FleetTests`.)
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
