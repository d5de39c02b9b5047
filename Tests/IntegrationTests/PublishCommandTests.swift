import EarshotWire
import Foundation
import Testing
import TestSupport

/// Issue 32: `earshotctl publish` against a real daemon and a real Distribution registry, and a
/// second daemon configured with the `oci://` tag installing from the registry alone.
@Suite struct PublishCommandTests {
    @Test func earshotctlPublishesAndASecondDaemonInstallsFromTheRegistry() async throws {
        try await AssetFixture.with { fixture in
            let asset = try await fixture.build(.random("asr-en", version: 1, locales: ["en-US"], bytes: 256 << 10, seed: 70))
            try await fixture.publishCatalog(version: 1, assets: [asset])
            let registry = try await RegistryServer.start()
            let daemon = try await fixture.startDaemonWithCatalog()
            let target = "oci://\(registry.authority)/earshot/catalog:v1"

            // Mistakes are found before the daemon is asked (exit 64).
            for wrong in [["publish"], ["publish", "http://\(registry.authority)/earshot/catalog"], ["publish", "oci://\(registry.authority)/Earshot:v1"],
                          ["publish", "oci://\(registry.authority)/earshot@sha256:" + String(repeating: "0", count: 64)], ["publish", target, "--timer"]] {
                let refused = try await daemon.earshotctl(wrong)
                #expect(refused.status == 64, "\(wrong): \(refused.stderr)")
            }

            // A registry that cannot be reached: exit 1 with the reason.
            let unreachable = try await daemon.earshotctl(["publish", "oci://127.0.0.1:1/earshot/catalog:v1"])
            #expect(unreachable.status == 1 && unreachable.stderr.contains("127.0.0.1:1"), "\(unreachable.stderr)")

            let dry = try await daemon.earshotctl(["publish", target, "--dry-run"])
            #expect(dry.status == 0 && dry.stdout.contains("would publish catalog version 1"), "\(dry.stdout)\(dry.stderr)")
            #expect(!registry.requests().contains { ["PUT", "PATCH", "POST"].contains($0.method) }, "a dry run uploads nothing")

            let real = try await daemon.earshotctl(["publish", target])
            #expect(real.status == 0 && real.stdout.contains("published catalog version 1 to \(target)"), "\(real.stdout)\(real.stderr)")
            #expect(daemon.child.stderr.contains("published catalog version 1"), "the publish is logged")
            let again = try await daemon.earshotctl(["publish", target, "--json"])
            let reply = try JSONDecoder().decode(PublishReply.self, from: Data(again.stdout.utf8))
            #expect(reply.blobs.allSatisfy { $0.action == .present } && reply.manifestDigest?.hasPrefix("sha256:") == true)

            // A second daemon reads the tag; the catalog's own URL is gone, the registry serves.
            try FileManager.default.removeItem(atPath: fixture.server.root + asset.serverPath)
            let second = try await TestDaemon(config: """
                [Catalog]
                URL=\(target)
                KeysDirectory=\(fixture.keysDirectory)
                [Download]
                ConnectTimeoutSec=5
                MaxAttemptsPerMirror=1

                """, arguments: ["--state-dir", fixture.directory.file("second/state"), "--cache-dir", fixture.directory.file("second/cache")])
            defer { Task { await second.cleanUp() } }
            let catalog = try await second.earshotctl(["catalog", "refresh", "--json"])
            let sources = try JSONDecoder().decode(CatalogReply.self, from: Data(catalog.stdout.utf8)).sources
            #expect(sources.map(\.url) == [target] && sources.first?.version == 1, "\(catalog.stdout)\(catalog.stderr)")
            let install = try await second.earshotctl(["install", "--locale", "en-US"])
            #expect(install.status == 0, "\(install.stdout)\(install.stderr)")
            #expect(registry.blobGets("sha256:" + asset.sha256) == 1)
            let config = try await second.earshotctl(["config"])
            #expect(config.stdout.contains("Registry.AuthFile") && config.stdout.contains("Registry.PlainHTTPHosts"))
            await second.cleanUp()
        }
    }
}
