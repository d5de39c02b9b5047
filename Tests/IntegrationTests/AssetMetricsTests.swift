import EarshotWire
import Foundation
import Testing
import TestSupport

/// The asset inventory's metrics (issue 12 item 4) against real nginx and minisign: install jobs
/// and downloaded bytes, verification failures by check, GC runs and bytes freed, reservations per
/// locale, catalog version and age, parsed with the PyPI `prometheus-client` parser.
@Suite struct AssetMetricsTests {
    @Test func assetCountersMoveWithInstallsFailuresAndGC() async throws {
        try await AssetFixture.with { fixture in
            let en = try await fixture.build(.random("asr-en", locales: ["en-US"], bytes: 128 << 10, seed: 70))
            let de = try await fixture.build(.random("asr-de", locales: ["de-DE"], bytes: 64 << 10, seed: 71))
            try await fixture.publishCatalog(version: 1, assets: [en, de], modified: Date(timeIntervalSinceNow: -3600))
            let daemon = try await fixture.startDaemonWithCatalog("[Assets]\nGCGracePeriodSec=0\n")
            let socket = PrometheusScrape.socket(of: daemon)
            let start = try await PrometheusScrape.scrape(socket, in: daemon.directory)
            #expect(start[#"earshot_catalog_version{"source": "\#(fixture.server.url("/catalog.json"))"}"#] == 1)
            #expect(start[#"earshot_catalog_age_seconds{"source": "\#(fixture.server.url("/catalog.json"))"}"#].map { $0 >= 0 && $0 < 600 } == true)
            #expect(start["earshot_download_bytes_total{}"] == 0)

            let client = try TestConnection(daemon.socket)
            defer { client.close() }
            try await client.hello("org.example.metrics")
            _ = try await client.call(InstallRequest(id: "i1", modules: [Modules.transcriber("en-US")]), timeout: .seconds(60)).decode(InstallReply.self)
            let installed = try await PrometheusScrape.scrape(socket, in: daemon.directory)
            #expect(installed[#"earshot_install_jobs_started_total{"kind": "install"}"#] == 1)
            #expect(installed[#"earshot_install_jobs_finished_total{"kind": "install", "result": "succeeded"}"#] == 1)
            #expect(installed["earshot_download_bytes_total{}"] == Double(en.size))
            #expect(installed[#"earshot_reservations{"locale": "en-US"}"#] == 1)

            // A wrong hash in the catalog: the job fails and the hash check counts it.
            var badDE = de
            badDE.sha256 = String(repeating: "e", count: 64)
            try await fixture.publishCatalog(version: 2, assets: [en, badDE], modified: Date(timeIntervalSinceNow: -1800))
            _ = try await client.call(CatalogRequest(id: "r", refresh: true)).decode(CatalogReply.self)
            let failed = try await client.call(InstallRequest(id: "i2", modules: [Modules.transcriber("de-DE")]), timeout: .seconds(60))
            #expect(failed.type == ErrorEvent.eventType)
            // A tampered catalog (its signature is of other bytes) counts as a signature failure.
            let original = try String(contentsOfFile: fixture.server.root + "/catalog.json", encoding: .utf8)
            try fixture.server.put("/catalog.json", Array((original + " ").utf8), modified: Date(timeIntervalSinceNow: -900))
            let refused = try await client.call(CatalogRequest(id: "r2", refresh: true)).decode(CatalogReply.self)
            #expect(refused.sources.map(\.outcome) == ["failed"])
            let failures = try await PrometheusScrape.scrape(socket, in: daemon.directory)
            #expect(failures[#"earshot_verification_failures_total{"check": "hash"}"#] == 1)
            #expect(failures[#"earshot_verification_failures_total{"check": "signature"}"#] == 1)
            #expect(failures[#"earshot_verification_failures_total{"check": "archive"}"#] == 0)
            #expect(failures[#"earshot_install_jobs_finished_total{"kind": "install", "result": "failed"}"#] == 1)
            #expect(failures[#"earshot_catalog_version{"source": "\#(fixture.server.url("/catalog.json"))"}"#] == 2)

            // Released and collected (the first run marks it unneeded, the second removes it).
            _ = try await client.call(ReleaseRequest(id: "rel", locale: "en-US")).decode(ReleaseReply.self)
            var freed: Int64 = 0
            for _ in 0..<2 {
                let gc = try await ChildProcess.run(BuiltProducts.path("earshotctl"), ["--socket", daemon.socket, "gc", "--json"], in: daemon.directory)
                freed += try JSONDecoder().decode(GCReply.self, from: Data(gc.stdout.utf8)).freedBytes
            }
            let collected = try await PrometheusScrape.scrape(socket, in: daemon.directory)
            #expect(collected["earshot_gc_runs_total{}", default: 0] >= failures["earshot_gc_runs_total{}", default: 0] + 2)
            #expect(freed > 0)
            #expect(collected["earshot_gc_freed_bytes_total{}", default: 0] - failures["earshot_gc_freed_bytes_total{}", default: 0] >= Double(freed))
            #expect(collected[#"earshot_reservations{"locale": "en-US"}"#] == nil)
            #expect(PrometheusScrape.sum(collected, "earshot_installed_assets{") == 0)
        }
    }
}
