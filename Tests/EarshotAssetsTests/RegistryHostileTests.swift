@testable import EarshotAssets
import EarshotSystem
import EarshotWire
import Foundation
import Testing
import TestSupport

/// Registries that lie or misbehave, played by nginx serving hand-made registry paths (and, for
/// tokens, guarding a real registry): every refusal is a clear error and nothing is stored.
@Suite("Registry: hostile and token-guarded registries", .serialized)
struct RegistryHostileTests {
    /// Lays out a catalog artifact under `/v2/<repository>/` in nginx's root, with the catalog and
    /// signature blobs as given (their descriptors may lie) and the manifest under tag `v1` and
    /// under its own digest.
    private func serve(_ nginx: NginxServer, repository: String, catalog: [UInt8], signature: [UInt8],
                       catalogDescriptor: OCIDescriptor? = nil, servedCatalog: [UInt8]? = nil) throws -> String {
        let catalogEntry = catalogDescriptor ?? CatalogArtifact.descriptor(catalog, mediaType: CatalogArtifact.catalogMediaType, title: "catalog.json")
        let signatureEntry = CatalogArtifact.descriptor(signature, mediaType: CatalogArtifact.signatureMediaType, title: "catalog.json.minisig")
        try nginx.put("v2/\(repository)/blobs/\(catalogEntry.digest)", servedCatalog ?? catalog)
        try nginx.put("v2/\(repository)/blobs/\(signatureEntry.digest)", signature)
        let manifest = CatalogArtifact(catalog: catalogEntry, signature: signatureEntry, assets: []).manifest()
        try nginx.put("v2/\(repository)/manifests/v1", manifest)
        try nginx.put("v2/\(repository)/manifests/\(CatalogArtifact.digest(of: manifest))", manifest)
        return CatalogArtifact.digest(of: manifest)
    }

    /// Refreshes a fresh daemon reading `source`; returns its one result and checks nothing was stored.
    private func refresh(_ fixture: RegistryFixture, _ source: String) async throws -> CatalogRefreshResult {
        let daemon = try await fixture.service("daemon-\(UUID().uuidString.prefix(6))", catalogs: [source], download: .hostile)
        let result = try #require(await daemon.service.refreshCatalogs().first)
        if result.outcome != .updated {
            #expect(await daemon.service.catalogSummary().sources.first?.version == nil, "nothing is stored from \(source)")
        }
        await daemon.stop()
        return result
    }

    @Test("digest and size lies, a tampered catalog, a redirect loop and an unsigned change are each refused")
    func lyingRegistriesAreRefused() async throws {
        let fixture = try await RegistryFixture.make()
        defer { fixture.remove() }
        let nginx = try await NginxServer.start(NginxServer.Options(routes: [NginxServer.Route(prefix: "/v2/loop/blobs/", status: 302, target: "/v2/loop/blobs/again")]))
        let host = "127.0.0.1:\(nginx.port)"
        let (catalog, signature) = try fixture.signedCatalog()

        // The honest layout verifies: the fakes below differ from it in one way each.
        _ = try serve(nginx, repository: "honest", catalog: catalog, signature: signature)
        #expect(try await refresh(fixture, "oci://\(host)/honest:v1").outcome == .updated)

        // A manifest fetched by digest that hashes to something else.
        let other = try serve(nginx, repository: "swapped", catalog: catalog, signature: signature)
        let honestManifest = try #require(FileManager.default.contents(atPath: nginx.root + "/v2/honest/manifests/v1"))
        var changed = Array(honestManifest)
        changed.append(UInt8(ascii: "\n"))
        try nginx.put("v2/swapped/manifests/\(other)", changed)
        let swapped = try await refresh(fixture, "oci://\(host)/swapped@\(other)")
        #expect(swapped.outcome == .failed && swapped.message?.contains("hashes to") == true, "\(swapped)")

        // A manifest pointing at a blob of another size: the registry sends more bytes than announced, or fewer.
        let real = CatalogArtifact.descriptor(catalog, mediaType: CatalogArtifact.catalogMediaType, title: "catalog.json")
        for (repository, size) in [("longer", real.size - 1), ("shorter", real.size + 1)] {
            var lying = real
            lying.size = size
            _ = try serve(nginx, repository: repository, catalog: catalog, signature: signature, catalogDescriptor: lying)
            let result = try await refresh(fixture, "oci://\(host)/\(repository):v1")
            #expect(result.outcome == .failed && result.message?.contains("does not verify") == true, "\(repository): \(result)")
        }

        // A blob whose bytes do not hash to its digest.
        var tampered = catalog
        tampered[tampered.count / 2] ^= 0x20
        _ = try serve(nginx, repository: "tampered", catalog: catalog, signature: signature, servedCatalog: tampered)
        let corrupt = try await refresh(fixture, "oci://\(host)/tampered:v1")
        #expect(corrupt.outcome == .failed && corrupt.message?.contains("hashes to") == true, "\(corrupt)")

        // Consistent digests but a catalog the signature does not cover: a registry is transport, not trust.
        _ = try serve(nginx, repository: "unsigned", catalog: tampered, signature: signature)
        let unsigned = try await refresh(fixture, "oci://\(host)/unsigned:v1")
        #expect(unsigned.outcome == .failed && unsigned.message?.contains("signature") == true, "\(unsigned)")

        // Blobs that redirect to themselves.
        let manifest = try #require(FileManager.default.contents(atPath: nginx.root + "/v2/honest/manifests/v1"))
        try nginx.put("v2/loop/manifests/v1", Array(manifest))
        let loop = try await refresh(fixture, "oci://\(host)/loop:v1")
        #expect(loop.outcome == .failed && loop.message?.lowercased().contains("redirect") == true, "\(loop)")
    }

    @Test("a registry serving corrupt asset bytes: the install goes on from the catalog's own URL, and the bytes are not installed")
    func corruptAssetBlobFallsBackToTheNextMirror() async throws {
        let fixture = try await RegistryFixture.make()
        defer { fixture.remove() }
        let nginx = try await NginxServer.start()
        let (catalog, signature) = try fixture.signedCatalog()
        _ = try serve(nginx, repository: "corrupt", catalog: catalog, signature: signature)
        let vad = try #require(try await fixture.entries()["vad"])
        var corrupt = StandardFiles.vad
        corrupt[100] ^= 0xff
        try nginx.put("v2/corrupt/blobs/sha256:\(vad.sha256)", corrupt)

        let daemon = try await fixture.service("daemon", catalogs: ["oci://127.0.0.1:\(nginx.port)/corrupt:v1"], download: .hostile)
        let outcome = try await fixture.refreshAndInstall(daemon, Modules.detector)
        #expect(outcome.installed.contains("vad@1"))
        let installed = try #require(try await daemon.service.installedAssets().first { $0.key == "vad@1" })
        #expect(FileManager.default.contents(atPath: installed.path + "/vad.onnx").map(Array.init) == StandardFiles.vad)
        await daemon.stop()
        #expect(nginx.accessLog().contains { $0.method == "GET" && $0.path.hasSuffix(vad.sha256) && $0.status == 200 }, "the registry was tried first")
        #expect(fixture.inventory.logs.warnings.contains { $0.message.contains("trying the next mirror") })
    }

    @Test("bearer tokens: the realm is asked with the registry's credentials, and a realm on another host never gets them")
    func bearerTokenFlow() async throws {
        let fixture = try await RegistryFixture.make()
        defer { fixture.remove() }
        let registry = try await RegistryServer.start()
        let target = try OCIReference.parse("oci://\(registry.authority)/earshot/catalog:v1")
        let publisher = try await fixture.publisher()
        _ = try await publisher.service.publish(to: target, assetIDs: ["vad"], dryRun: false)
        await publisher.stop()
        try fixture.removeOriginalSources()

        let basic = "Basic " + Data("fleet:token-secret".utf8).base64EncodedString()
        // A token service elsewhere that answers only anonymous requests.
        let elsewhere = try await NginxServer.start(NginxServer.Options(serverDirectives: """
                    location = /token {
                        if ($http_authorization != "") { return 418; }
                        default_type application/json;
                        return 200 '{"token": "anonymous-token"}';
                    }

            """))
        func front(realm: String, token: String) async throws -> NginxServer {
            try await NginxServer.start(NginxServer.Options(serverDirectives: """
                        location = /token {
                            if ($http_authorization != "\(basic)") { return 401; }
                            default_type application/json;
                            return 200 '{"token": "\(token)", "expires_in": 300}';
                        }
                        location /v2/ {
                            if ($http_authorization != "Bearer \(token)") {
                                add_header WWW-Authenticate 'Bearer realm="\(realm)",service="earshot-test",scope="repository:earshot/catalog:pull"' always;
                                return 401;
                            }
                            proxy_pass \(registry.baseURL);
                            proxy_set_header Host $http_host;
                        }

                """))
        }
        // The realm on the registry's own host: the credentials for that host are sent there.
        let guarded = try await front(realm: "http://127.0.0.1:$server_port/token", token: "site-token")
        let guardedHost = "127.0.0.1:\(guarded.port)"
        let source = "oci://\(guardedHost)/earshot/catalog:v1"
        let withoutCredentials = try await refresh(fixture, source)
        #expect(withoutCredentials.outcome == .failed && withoutCredentials.message?.contains("none are configured") == true, "\(withoutCredentials)")

        let credentials = RegistrySettings(authFile: try fixture.authFile([guardedHost: ("fleet", "token-secret")]))
        let daemon = try await fixture.service("daemon", catalogs: [source], registry: credentials)
        let outcome = try await fixture.refreshAndInstall(daemon, Modules.detector)
        #expect(outcome.installed.contains { $0.hasPrefix("vad@") })
        await daemon.stop()

        // A registry whose challenge names a realm on another host: the token request goes there
        // without the registry's credentials (the realm answers 418 to any Authorization).
        let redirected = try await front(realm: elsewhere.url("/token"), token: "anonymous-token")
        let redirectedHost = "127.0.0.1:\(redirected.port)"
        let other = try await fixture.service("other", catalogs: ["oci://\(redirectedHost)/earshot/catalog:v1"],
                                              registry: RegistrySettings(authFile: try fixture.authFile([redirectedHost: ("fleet", "token-secret")])))
        #expect(await other.service.refreshCatalogs().map(\.outcome) == [.updated])
        #expect(elsewhere.accessLog().contains { $0.path.hasPrefix("/token") && $0.status == 200 })
        await other.stop()
    }

    @Test("blobs redirected to storage on another host: followed, and the registry's token stays with the registry")
    func redirectsToStorageKeepTheToken() async throws {
        let fixture = try await RegistryFixture.make()
        defer { fixture.remove() }
        let registry = try await RegistryServer.start()
        let publisher = try await fixture.publisher()
        let published = try await publisher.service.publish(to: try OCIReference.parse("oci://\(registry.authority)/earshot/catalog:v1"), assetIDs: ["vad"], dryRun: false)
        await publisher.stop()
        // Storage answers 418 to any request carrying an Authorization header.
        let storage = try await NginxServer.start(NginxServer.Options(serverDirectives: """
                    location /blobs/ {
                        if ($http_authorization != "") { return 418; }
                    }

            """))
        let (catalog, signature) = try fixture.signedCatalog()
        for bytes in [catalog, signature, StandardFiles.vad] { try storage.put("blobs/" + CatalogArtifact.digest(of: bytes), bytes) }
        #expect(Set(published.blobs.filter { $0.name != "config" }.map(\.digest)) == Set([catalog, signature, StandardFiles.vad].map { CatalogArtifact.digest(of: $0) }))
        let front = try await NginxServer.start(NginxServer.Options(serverDirectives: """
                    location = /token { default_type application/json; return 200 '{"token": "registry-token"}'; }
                    location ~ ^/v2/earshot/catalog/blobs/(sha256:[0-9a-f]+)$ {
                        if ($http_authorization != "Bearer registry-token") {
                            add_header WWW-Authenticate 'Bearer realm="http://127.0.0.1:$server_port/token",service="earshot-test"' always;
                            return 401;
                        }
                        return 307 \(storage.baseURL)/blobs/$1;
                    }
                    location /v2/ { proxy_pass \(registry.baseURL); proxy_set_header Host $http_host; }

            """))
        try fixture.removeOriginalSources()
        let daemon = try await fixture.service("daemon", catalogs: ["oci://127.0.0.1:\(front.port)/earshot/catalog:v1"], download: .hostile)
        let outcome = try await fixture.refreshAndInstall(daemon, Modules.detector)
        #expect(outcome.installed.contains { $0.hasPrefix("vad@") })
        await daemon.stop()
        let served = storage.accessLog().filter { $0.method == "GET" }
        #expect(served.count == 3 && served.allSatisfy { $0.status == 200 }, "catalog, signature and asset came from storage without the token: \(served)")
    }

    @Test("a token that expires during a long download: the resume gets a fresh one and goes on where it stopped")
    func expiredTokenMidDownload() async throws {
        let fixture = try await RegistryFixture.make()
        defer { fixture.remove() }
        let registry = try await RegistryServer.start()
        let archive = try await fixture.inventory.tarGz("tx-big", ["model.onnx": NginxServer.seededBytes(count: 3 << 20, seed: 11)])
        let big = try fixture.inventory.asset("tx-big", locales: ["it-IT"], path: archive, files: ["model": "model.onnx"])
        try await fixture.inventory.publish(version: 2, try await fixture.inventory.standardAssets() + [big])
        let publisher = try await fixture.publisher()
        _ = try await publisher.service.publish(to: try OCIReference.parse("oci://\(registry.authority)/earshot/catalog:v1"), assetIDs: ["tx-big"], dryRun: false)
        await publisher.stop()
        try fixture.removeOriginalSources()
        // The token service hands out token-a until the test "expires" it, token-b after.
        let expired = fixture.inventory.directory.file("expired")
        let front = try await NginxServer.start(NginxServer.Options(rateLimit: "1m", serverDirectives: """
                    location = /token {
                        default_type application/json;
                        if (-f \(expired)) { return 200 '{"token": "token-b"}'; }
                        return 200 '{"token": "token-a"}';
                    }
                    location /v2/ {
                        set $valid "Bearer token-a";
                        if (-f \(expired)) { set $valid "Bearer token-b"; }
                        if ($http_authorization != $valid) {
                            add_header WWW-Authenticate 'Bearer realm="http://127.0.0.1:$server_port/token",service="earshot-test"' always;
                            return 401;
                        }
                        proxy_pass \(registry.baseURL);
                        proxy_set_header Host $http_host;
                    }

            """))
        var options = DownloadOptions.hostile
        options.maxAttemptsPerMirror = 2
        let daemon = try await fixture.service("daemon", catalogs: ["oci://127.0.0.1:\(front.port)/earshot/catalog:v1"], download: options)
        #expect(await daemon.service.refreshCatalogs().map(\.outcome) == [.updated])
        daemon.startRunning()
        let progress = ProgressLog()
        let install = Task { try await daemon.service.install([Modules.transcriber("it-IT")], for: appA, progress: progress.record) }
        #expect(await eventually { progress.maxBytesDone >= 1 << 20 })
        #expect(FileManager.default.createFile(atPath: expired, contents: Data()))
        await front.killWorkers()
        let outcome = try await install.value
        #expect(outcome.installed.contains("tx-big@1"))
        await daemon.stop()
        let log = front.accessLog()
        #expect(log.filter { $0.path.hasPrefix("/token") }.count >= 2, "a second token was asked for")
        #expect(log.contains { $0.method == "GET" && $0.path.hasSuffix(big.sha256) && $0.status == 401 }, "the old token was refused")
        #expect(log.contains { $0.method == "GET" && $0.path.hasSuffix(big.sha256) && $0.status == 206 && $0.range != nil }, "the download resumed: \(log.map(\.request))")
    }

    @Test("TLS: a registry is verified against [Download] CAFile; a failed verification is an error, never a step down to plain HTTP")
    func tlsWithTheAdminsCA() async throws {
        let fixture = try await RegistryFixture.make()
        defer { fixture.remove() }
        let registry = try await RegistryServer.start()
        let front = try await NginxServer.start(NginxServer.Options(tls: true, serverDirectives: """
                    location /v2/ {
                        client_max_body_size 0;
                        proxy_pass \(registry.baseURL);
                        proxy_set_header Host $http_host;
                        proxy_set_header X-Forwarded-Proto https;
                    }

            """))
        let source = "oci://127.0.0.1:\(front.port)/earshot/catalog:v1"
        let trusting = DownloadOptions.hostile.withCA(front.caFile)
        let publisher = try await fixture.service("publisher", catalogs: [fixture.inventory.catalogURL], download: trusting)
        _ = await publisher.service.refreshCatalogs()
        _ = try await publisher.service.publish(to: try OCIReference.parse(source), assetIDs: ["vad"], dryRun: false)
        await publisher.stop()

        // Behind a TLS front that does not say so, the registry's upload locations are plain
        // HTTP: the upload stops rather than continue in the clear.
        let careless = try await NginxServer.start(NginxServer.Options(tls: true, serverDirectives: """
                    location /v2/ {
                        client_max_body_size 0;
                        proxy_pass \(registry.baseURL);
                        proxy_set_header Host $http_host;
                    }

            """))
        let refusing = try await fixture.service("careless", catalogs: [fixture.inventory.catalogURL], download: trusting.withCA(careless.caFile))
        _ = await refusing.service.refreshCatalogs()
        do {
            _ = try await refusing.service.publish(to: try OCIReference.parse("oci://127.0.0.1:\(careless.port)/earshot/other:v1"), assetIDs: ["vad"], dryRun: false)
            Issue.record("an upload went on over plain HTTP")
        } catch let error as RegistryError {
            guard case .plainHTTPRefused = error else { Issue.record("expected plainHTTPRefused, got \(error)"); return }
        }
        await refusing.stop()

        let untrusting = try await refresh(fixture, source)
        #expect(untrusting.outcome == .failed && untrusting.message?.contains("certificate") == true, "\(untrusting)")
        let daemon = try await fixture.service("daemon", catalogs: [source], download: trusting)
        #expect(await daemon.service.refreshCatalogs().map(\.outcome) == [.updated])
        await daemon.stop()
        #expect(front.accessLog().contains { $0.path.hasPrefix("/v2/earshot/catalog/blobs/") && $0.status == 200 }, "served over TLS")
    }

    @Test("a chunked upload refused mid-way by a busy registry goes on from where the registry says it stands")
    func chunkedUploadResumes() async throws {
        let registry = try await RegistryServer.start()
        // At most five PATCHes a second: back-to-back chunks are refused with 503 in between.
        let front = try await NginxServer.start(NginxServer.Options(serverDirectives: """
                    location /v2/ {
                        limit_req zone=patches nodelay;
                        limit_req_status 503;
                        client_max_body_size 0;
                        proxy_pass \(registry.baseURL);
                        proxy_set_header Host $http_host;
                    }

            """, httpDirectives: """
            map $request_method $patching { PATCH $binary_remote_addr; default ""; }
            limit_req_zone $patching zone=patches:1m rate=5r/s;

            """))
        var options = DownloadOptions.hostile
        options.maxAttemptsPerMirror = 3
        options.backoffBase = .milliseconds(300)
        let client = RegistryClient(settings: RegistrySettings(), options: options, uploadChunkBytes: 64 << 10)
        let reference = try OCIReference.parse("oci://127.0.0.1:\(front.port)/earshot/upload:v1")
        let bytes = NginxServer.seededBytes(count: (512 << 10) + 123, seed: 9)
        let digest = CatalogArtifact.digest(of: bytes)
        let acknowledged = ProgressValues()
        try await client.pushBlob(reference, digest: digest, size: Int64(bytes.count), read: { offset, count in
            Array(bytes[Int(offset)..<Int(offset) + count])
        }, progress: acknowledged.record)
        let log = front.accessLog()
        #expect(log.contains { $0.method == "PATCH" && $0.status == 503 }, "the registry was busy at least once")
        #expect(log.filter { $0.method == "PATCH" && $0.status == 202 }.count == 9, "each of the nine chunks arrived once")
        #expect(acknowledged.values.last == Int64(bytes.count))
        let stored = try await client.blob(reference, OCIDescriptor(mediaType: "application/octet-stream", digest: digest, size: Int64(bytes.count)))
        #expect(stored == bytes)
    }
}

/// Values reported from another thread, in order.
final class ProgressValues: @unchecked Sendable {
    private let lock = NSLock()
    private var recorded: [Int64] = []

    func record(_ value: Int64) { lock.withLock { recorded.append(value) } }
    var values: [Int64] { lock.withLock { recorded } }
}

extension DownloadOptions {
    /// These options trusting `caFile` instead of the system's CAs.
    func withCA(_ caFile: String?) -> DownloadOptions {
        var options = self
        options.caFile = caFile
        return options
    }

    /// One attempt, short timeouts: a hostile registry's refusal is final, so tests need no backoff.
    static var hostile: DownloadOptions {
        DownloadOptions(maxAttemptsPerMirror: 1, backoffBase: .milliseconds(10), connectTimeout: .seconds(5), lowSpeedTime: .seconds(10))
    }
}
