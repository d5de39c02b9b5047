import EarshotWire
import Foundation
import Testing
import TestSupport

/// Issue 32, item 4: a site behind a pull-through cache. One upstream registry, one Distribution
/// instance in proxy mode in front of it, and ten real `earshotd` processes (each with its own
/// state and cache directories) installing the same asset through the cache with `earshotctl`.
@Suite struct FleetTests {
    /// Starts a daemon reading `source`, refreshes its catalog, installs `locale` and stops it;
    /// returns the install's wall time in seconds (earshotctl included).
    func install(_ locale: String, from source: String, keys: String) async throws -> Double {
        let daemon = try await TestDaemon(config: """
            [Catalog]
            URL=\(source)
            KeysDirectory=\(keys)
            [Download]
            ConnectTimeoutSec=5

            """)
        defer { Task { await daemon.cleanUp() } }
        let refreshed = try await daemon.earshotctl(["catalog", "refresh"])
        #expect(refreshed.status == 0, "\(refreshed.stdout)\(refreshed.stderr)")
        let started = ContinuousClock.now
        let installed = try await daemon.earshotctl(["install", "--locale", locale])
        let elapsed = ContinuousClock.now - started
        #expect(installed.status == 0, "\(installed.stdout)\(installed.stderr)")
        await daemon.cleanUp()
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    @Test func tenDaemonsThroughOnePullThroughCache() async throws {
        try await AssetFixture.with { fixture in
            let spread = try await fixture.build(.random("asr-it", locales: ["it-IT"], bytes: 4 << 20, seed: 80))
            let burst = try await fixture.build(.random("asr-pt", locales: ["pt-PT"], bytes: 4 << 20, seed: 81))
            try await fixture.publishCatalog(version: 1, assets: [spread, burst])
            let upstream = try await RegistryServer.start()
            let publisher = try await fixture.startDaemonWithCatalog()
            let published = try await publisher.earshotctl(["publish", "oci://\(upstream.authority)/earshot/catalog:v1"])
            #expect(published.status == 0, "\(published.stdout)\(published.stderr)")
            for asset in [spread, burst] { try FileManager.default.removeItem(atPath: fixture.server.root + asset.serverPath) }
            let cache = try await RegistryServer.start(.proxy(upstream: upstream.baseURL))
            let throughCache = "oci://\(cache.authority)/earshot/catalog:v1"
            let digest = "sha256:" + spread.sha256

            // One after another, as earshot-update.timer's RandomizedDelaySec spreads a fleet over
            // hours: far longer than the cache takes to store what it fetched.
            var seconds: [Double] = []
            var afterFirst = 0
            for index in 0..<10 {
                seconds.append(try await install("it-IT", from: throughCache, keys: fixture.keysDirectory))
                let deadline = ContinuousClock.now + .seconds(10)
                while !cache.stores(digest), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
                if index == 0 { afterFirst = upstream.blobGets(digest) }
            }
            let throughGets = upstream.blobGets(digest)
            // Distribution 2.8's proxy fetches a blob it lacks more than once for that first
            // request (to answer it and, separately, to store it): a constant per blob and site.
            #expect(afterFirst >= 1)
            #expect(throughGets == afterFirst, "daemons 2–10 were served by the cache alone")
            #expect(cache.blobGets(digest) == 10)

            // The baseline: ten daemons straight from the upstream.
            var direct: [Double] = []
            for _ in 0..<10 { direct.append(try await install("it-IT", from: "oci://\(upstream.authority)/earshot/catalog:v1", keys: fixture.keysDirectory)) }
            let directGets = upstream.blobGets(digest) - throughGets
            #expect(directGets == 10)

            // Ten at the same moment, before the cache has the blob.
            let together = try await withThrowingTaskGroup(of: Double.self) { group in
                for _ in 0..<10 { group.addTask { try await install("pt-PT", from: throughCache, keys: fixture.keysDirectory) } }
                var all: [Double] = []
                for try await time in group { all.append(time) }
                return all
            }
            #expect(together.count == 10)
            let rest = seconds.dropFirst().sorted()
            func format(_ value: Double) -> String { String(format: "%.3f", value) }
            print("fleet: 10 daemons spread, \(spread.size) byte asset; upstream blob GETs through the cache \(throughGets) (all from the first daemon), "
                  + "without it \(directGets) (ratio \(String(format: "%.2f", Double(throughGets) / Double(directGets)))); cache blob GETs \(cache.blobGets(digest)); "
                  + "install seconds through the cache: first \(format(seconds[0])), others median \(format(rest[rest.count / 2])), max \(format(rest.last ?? 0)); "
                  + "straight from the upstream: median \(format(direct.sorted()[5]))")
            print("fleet: 10 daemons at once; upstream blob GETs \(upstream.blobGets("sha256:" + burst.sha256)), cache blob GETs \(cache.blobGets("sha256:" + burst.sha256)); "
                  + "install seconds median \(format(together.sorted()[5])), max \(format(together.max() ?? 0))")
        }
    }
}
