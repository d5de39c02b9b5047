@testable import EarshotAssets
import EarshotSystem
import EarshotWire
import Foundation
import Testing
import TestSupport

/// `publish` into and `oci://` catalog sources from a real Distribution registry on loopback:
/// plain, with htpasswd basic auth, and the signature and rollback rules unchanged.
@Suite("Registry: publish and pull against a real registry", .serialized)
struct RegistryPublishPullTests {
    @Test("publish pushes the signed catalog and every asset once; a daemon pointed at the tag installs from the registry alone")
    func publishThenInstallFromTheRegistry() async throws {
        let fixture = try await RegistryFixture.make()
        defer { fixture.remove() }
        let registry = try await RegistryServer.start()
        let target = try OCIReference.parse("oci://\(registry.authority)/earshot/catalog:v1")
        let publisher = try await fixture.publisher()
        let entries = try await fixture.entries()

        let pinned = try OCIReference.parse("oci://\(registry.authority)/earshot/catalog@sha256:" + String(repeating: "0", count: 64))
        await #expect(throws: RegistryError.self, "publish writes tags, not digests") { _ = try await publisher.service.publish(to: pinned, dryRun: true) }
        let planned = try await publisher.service.publish(to: target, dryRun: true)
        #expect(planned.blobs.allSatisfy { $0.action == .wouldPush } && planned.blobs.count == entries.count + 3)
        #expect(planned.manifestDigest == nil)
        #expect(registry.requests().allSatisfy { $0.method == "HEAD" || $0.method == "GET" && $0.path == "/v2/" }, "a dry run uploads nothing")

        let first = try await publisher.service.publish(to: target, dryRun: false)
        #expect(first.blobs.filter { $0.action == .pushed }.count == entries.count + 3)
        let manifest = try #require(first.manifestDigest)
        let again = try await publisher.service.publish(to: target, dryRun: false)
        #expect(again.blobs.allSatisfy { $0.action == .present }, "blobs the repository has are skipped")
        #expect(again.manifestDigest == manifest, "the same catalog and assets make the same manifest")
        await publisher.stop()

        try fixture.removeOriginalSources()
        let daemon = try await fixture.service("daemon", catalogs: ["\(target)"])
        let outcome = try await fixture.refreshAndInstall(daemon, Modules.transcriber("en-US"))
        #expect(await daemon.service.catalogSummary().sources.first?.version == 1)
        #expect(outcome.installed.contains { $0.hasPrefix("tx-en@") })
        let txEn = try #require(entries["tx-en"])
        #expect(registry.blobGets("sha256:" + txEn.sha256) == 1, "\(registry.requests())")

        let manifestGets = registry.requests().filter { $0.method == "GET" && $0.path.contains("/manifests/") }.count
        let unchanged = await daemon.service.refreshCatalogs()
        #expect(unchanged.map(\.outcome) == [.unchanged], "\(unchanged)")
        #expect(registry.requests().filter { $0.method == "GET" && $0.path.contains("/manifests/") }.count == manifestGets,
                "revalidation is a HEAD of the manifest, compared by digest")
        await daemon.stop()
    }

    @Test("a tag moved to an older catalog is refused as a rollback; the newer one stays")
    func tagMovedBackIsARollback() async throws {
        let fixture = try await RegistryFixture.make()
        defer { fixture.remove() }
        let registry = try await RegistryServer.start()
        let old = try OCIReference.parse("oci://\(registry.authority)/earshot/catalog:old")
        let current = try OCIReference.parse("oci://\(registry.authority)/earshot/catalog:current")
        let publisher = try await fixture.publisher()
        _ = try await publisher.service.publish(to: old, assetIDs: ["vad"], dryRun: false)
        try await fixture.inventory.publish(version: 2, try await fixture.inventory.standardAssets())
        #expect(await publisher.service.refreshCatalogs().first?.version == 2)
        _ = try await publisher.service.publish(to: current, assetIDs: ["vad"], dryRun: false)

        let daemon = try await fixture.service("daemon", catalogs: ["\(current)"])
        #expect(await daemon.service.refreshCatalogs().first?.version == 2)
        // The admin (or an attacker with push rights) points the tag back at version 1.
        try await fixture.inventory.publish(version: 1, try await fixture.inventory.standardAssets())
        _ = await publisher.service.refreshCatalogs()
        let older = try await fixture.service("older", catalogs: [fixture.inventory.catalogURL])
        _ = await older.service.refreshCatalogs()
        _ = try await older.service.publish(to: current, assetIDs: ["vad"], dryRun: false)
        let refused = await daemon.service.refreshCatalogs()
        #expect(refused.first?.outcome == .failed)
        #expect(refused.first?.message?.contains("rollback") == true || refused.first?.message?.contains("older") == true, "\(refused)")
        #expect(await daemon.service.catalogSummary().sources.first?.version == 2)
        for handle in [publisher, daemon, older] { await handle.stop() }
    }

    @Test("basic auth: credentials come from a 0600 auths file; none, wrong ones or a readable file are clear errors")
    func basicAuthFromTheAuthFile() async throws {
        let fixture = try await RegistryFixture.make()
        defer { fixture.remove() }
        let registry = try await RegistryServer.start(.basic(user: "fleet", password: "correct horse"))
        let target = try OCIReference.parse("oci://\(registry.authority)/earshot/catalog:v1")

        let anonymous = try await fixture.publisher()
        await #expect(throws: RegistryError.self) { _ = try await anonymous.service.publish(to: target, assetIDs: ["vad"], dryRun: false) }
        await anonymous.stop()

        for (settings, expected) in [(RegistrySettings(authFile: try fixture.authFile([registry.authority: ("fleet", "wrong")])), "unauthorized"),
                                     (RegistrySettings(authFile: try fixture.authFile([registry.authority: ("fleet", "correct horse")], mode: 0o644)), "authFile")] {
            let refused = try await fixture.publisher(registry: settings)
            do {
                _ = try await refused.service.publish(to: target, assetIDs: ["vad"], dryRun: false)
                Issue.record("publishing with \(expected) credentials succeeded")
            } catch let error as RegistryError {
                switch error {
                case .unauthorized: #expect(expected == "unauthorized", "\(error)")
                case .authFile: #expect(expected == "authFile", "\(error)")
                default: Issue.record("expected \(expected), got \(error)")
                }
            }
            await refused.stop()
        }

        let credentials = RegistrySettings(authFile: try fixture.authFile([registry.authority: ("fleet", "correct horse")]))
        let publisher = try await fixture.publisher(registry: credentials)
        let published = try await publisher.service.publish(to: target, assetIDs: ["vad"], dryRun: false)
        #expect(published.manifestDigest != nil)
        await publisher.stop()

        try fixture.removeOriginalSources()
        let daemon = try await fixture.service("daemon", catalogs: ["\(target)"], registry: credentials)
        let outcome = try await fixture.refreshAndInstall(daemon, Modules.detector)
        #expect(outcome.installed.contains { $0.hasPrefix("vad@") })
        await daemon.stop()
        let logged = fixture.inventory.logs.all.map(\.message).joined(separator: "\n")
        #expect(!logged.contains("correct horse") && !logged.contains(Data("fleet:correct horse".utf8).base64EncodedString()), "credentials are never logged")
    }

    @Test("updates come through the registry; the same catalog republished with more assets is stored once and revalidated after")
    func updatesThroughTheRegistry() async throws {
        let fixture = try await RegistryFixture.make()
        defer { fixture.remove() }
        let registry = try await RegistryServer.start()
        let target = try OCIReference.parse("oci://\(registry.authority)/earshot/catalog:stable")
        let publisher = try await fixture.publisher()
        _ = try await publisher.service.publish(to: target, assetIDs: ["vad"], dryRun: false)

        let daemon = try await fixture.service("daemon", catalogs: ["\(target)"])
        _ = try await fixture.refreshAndInstall(daemon, Modules.detector)
        #expect(await daemon.service.catalogSummary().sources.first?.version == 1)

        // The same catalog, now with every asset: a new manifest, the same signed document.
        _ = try await publisher.service.publish(to: target, dryRun: false)
        #expect(await daemon.service.refreshCatalogs().map(\.outcome) == [.unchanged])
        let manifestGets = registry.requests().filter { $0.method == "GET" && $0.path.contains("/manifests/") }.count
        #expect(await daemon.service.refreshCatalogs().map(\.outcome) == [.unchanged])
        #expect(registry.requests().filter { $0.method == "GET" && $0.path.contains("/manifests/") }.count == manifestGets,
                "the new manifest's digest was remembered: the next refresh is a HEAD")

        // Version 2 with a new detector: `update` (what earshot-update.timer runs) installs it from the registry.
        let vad2 = try fixture.inventory.asset("vad", version: 2, kind: .detector, locales: [], path: try fixture.inventory.plainFile("vad2.download", StandardFiles.bytes(50_000, seed: 16)),
                                              format: .file, files: ["model": "vad.onnx"])
        try await fixture.inventory.publish(version: 2, try await fixture.inventory.standardAssets().filter { $0.id != "vad" } + [vad2])
        _ = await publisher.service.refreshCatalogs()
        _ = try await publisher.service.publish(to: target, dryRun: false)
        try fixture.removeOriginalSources()
        let report = await daemon.service.update(requestedBy: "timer")
        #expect(report.updated == ["vad@1→2"], "\(report)")
        #expect(registry.blobGets("sha256:" + vad2.sha256) == 1)
        for handle in [publisher, daemon] { await handle.stop() }
    }
}

