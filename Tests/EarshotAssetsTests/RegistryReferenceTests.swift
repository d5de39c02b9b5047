@testable import EarshotAssets
import Foundation
import Testing
import TestSupport

/// The parts of the registry client that need no registry: `oci://` references, challenges,
/// the credentials file's format and permissions, and the catalog artifact's manifest.
@Suite("Registry: references, challenges, credentials, manifests")
struct RegistryReferenceTests {
    @Test("oci:// references parse host, port, repository, tag and digest; malformed ones say which part is wrong")
    func references() throws {
        let tagged = try OCIReference.parse("oci://registry.example:5000/earshot/catalog:v3")
        #expect(tagged.host == "registry.example:5000")
        #expect(tagged.hostName == "registry.example")
        #expect(tagged.repository == "earshot/catalog")
        #expect(tagged.selector == .tag("v3"))
        #expect(tagged.description == "oci://registry.example:5000/earshot/catalog:v3")
        let digest = "sha256:" + String(repeating: "ab", count: 32)
        #expect(try OCIReference.parse("oci://r.example/a/b@\(digest)").selector == .digest(digest))
        #expect(try OCIReference.parse("oci://r.example/models").selector == .tag("latest"))
        #expect(try OCIReference.parse("oci://[::1]:5000/x:y").hostName == "::1")
        let bad = ["http://r/x", "oci://r.example", "oci://r.example/Upper", "oci://r.example/a//b", "oci://r.example/a:-tag",
                   "oci://r.example/a@sha256:1234", "oci://r.example:99999/a", "oci://bad_host/a", "oci://r.example/a-/b", "oci://r.example/a..b"]
        for text in bad {
            #expect(throws: RegistryError.self, "\(text)") { try OCIReference.parse(text) }
        }
    }

    @Test("WWW-Authenticate challenges: quoted commas, several challenges in one value, Basic alone")
    func challenges() {
        let parsed = RegistryChallenge.parse([#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push""#])
        #expect(parsed == [RegistryChallenge(scheme: "bearer", parameters: ["realm": "https://auth.example/token", "service": "registry.example", "scope": "repository:a/b:pull,push"])])
        let two = RegistryChallenge.parse([#"Basic realm="x", Bearer realm="https://t.example/",service=s"#])
        #expect(two.map(\.scheme) == ["basic", "bearer"])
        #expect(two.last?.parameters["service"] == "s")
        #expect(RegistryChallenge.parse(["Basic"]) == [RegistryChallenge(scheme: "basic", parameters: [:])])
    }

    @Test("the credentials file: auths by host in both forms; group- or world-readable or foreign-owned files are refused")
    func credentialsFile() throws {
        let directory = try TempDirectory("auth")
        defer { directory.remove() }
        let auth = Data("alice:s3cret:with-colon".utf8).base64EncodedString()
        let path = try directory.write("config.json", #"{"auths": {"https://Registry.Example:5000/v1/": {"auth": "\#(auth)"}, "other.example": {"username": "bob", "password": "pw"}}}"#)
        chmod(path, 0o600)
        let loaded = try RegistryAuthFile.load(path)
        #expect(loaded["registry.example:5000"] == RegistryCredentials(username: "alice", password: "s3cret:with-colon"))
        #expect(loaded["other.example"]?.username == "bob")
        #expect(!"\(loaded)".contains("s3cret"), "credentials never print")
        chmod(path, 0o640)
        #expect(throws: RegistryError.self) { try RegistryAuthFile.load(path) }
        chmod(path, 0o600)
        let broken = try directory.write("broken.json", #"{"auths": {"r.example": {"identitytoken": "x"}}}"#)
        chmod(broken, 0o600)
        #expect(throws: RegistryError.self) { try RegistryAuthFile.load(broken) }
    }

    @Test("a catalog artifact's manifest round-trips; other artifacts and malformed digests are refused")
    func artifactManifest() throws {
        let catalog = CatalogArtifact.descriptor(Array("{}".utf8), mediaType: CatalogArtifact.catalogMediaType, title: "catalog.json")
        let signature = CatalogArtifact.descriptor(Array("sig".utf8), mediaType: CatalogArtifact.signatureMediaType, title: "catalog.json.minisig")
        let artifact = CatalogArtifact(catalog: catalog, signature: signature, assets: [])
        #expect(try CatalogArtifact.parse(artifact.manifest()) == artifact)
        #expect(artifact.manifest() == artifact.manifest(), "the same artifact always has the same digest")
        let image = #"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"\#(catalog.digest)","size":2},"layers":[]}"#
        #expect(throws: RegistryError.self) { try CatalogArtifact.parse(Array(image.utf8)) }
        let text = String(decoding: artifact.manifest(), as: UTF8.self).replacingOccurrences(of: signature.digest, with: "sha256:zz")
        #expect(throws: RegistryError.self) { try CatalogArtifact.parse(Array(text.utf8)) }
        #expect(throws: RegistryError.self) { try CatalogArtifact.parse(Array("not json".utf8)) }
    }

    @Test("plain HTTP only for loopback and listed hosts")
    func plainHTTPHosts() {
        let client = RegistryClient(settings: RegistrySettings(plainHTTPHosts: ["mirror.lan:5000"]), options: DownloadOptions())
        #expect(client.usesPlainHTTP("127.0.0.1:5000"))
        #expect(client.usesPlainHTTP("localhost"))
        #expect(client.usesPlainHTTP("[::1]:5000"))
        #expect(client.usesPlainHTTP("mirror.lan:5000"))
        #expect(!client.usesPlainHTTP("mirror.lan:5001"))
        #expect(!client.usesPlainHTTP("registry.example"))
    }
}
