import EarshotAssets
import Foundation
import TestSupport
import Testing

/// Signed catalogs made with the real `minisign`: valid, tampered, wrong key, rollback.
@Suite("Signed catalog")
struct CatalogSignatureTests {
    /// The sample catalog with its version set to `version`.
    func catalogBytes(version: Int64) -> [UInt8] {
        Array(sampleCatalogJSON.replacingOccurrences(of: "\"version\": 12", with: "\"version\": \(version)").utf8)
    }

    @Test(arguments: [false, true])
    func acceptsSignedCatalog(legacy: Bool) async throws {
        let fixture = try await MinisignFixture.make()
        defer { fixture.directory.remove() }
        let bytes = catalogBytes(version: 12)
        let signature = try await fixture.sign(bytes, name: "catalog.json", legacy: legacy)
        // minisign itself agrees.
        #expect(try await fixture.tool.verifies(fixture.directory.file("catalog.json"), signatureFile: fixture.directory.file("catalog.json.minisig"), publicKeyPath: fixture.keys.publicKeyPath, in: fixture.directory))

        let verified = try SignedCatalog.verify(catalogBytes: bytes, signatureText: signature, trustedKeys: [fixture.publicKey], currentVersion: nil)
        #expect(verified.catalog.version == 12)
        #expect(verified.catalog.assets.map(\.id) == ["whisper-tiny.en", "silero-vad"])
        #expect(verified.keyIDHex == fixture.publicKey.keyIDHex)
        #expect(verified.trustedComment.contains("\tfile:catalog.json"))
        #expect(!verified.isUnchanged)

        let newer = try SignedCatalog.verify(catalogBytes: Data(bytes), signatureText: signature, trustedKeys: [fixture.publicKey], currentVersion: 11)
        #expect(!newer.isUnchanged)
    }

    @Test(arguments: [false, true])
    func rejectsTamperedCatalogByte(legacy: Bool) async throws {
        let fixture = try await MinisignFixture.make()
        defer { fixture.directory.remove() }
        let bytes = catalogBytes(version: 12)
        let signature = try await fixture.sign(bytes, legacy: legacy)
        // Point the first mirror elsewhere by changing one byte.
        let text = String(decoding: bytes, as: UTF8.self)
        let mirror = try #require(text.range(of: "models.example.org"))
        let index = text.utf8.distance(from: text.utf8.startIndex, to: mirror.lowerBound)
        var tampered = bytes
        tampered[index] = UInt8(ascii: "n")
        #expect(throws: CatalogError.signature(.invalidSignature)) {
            try SignedCatalog.verify(catalogBytes: tampered, signatureText: signature, trustedKeys: [fixture.publicKey], currentVersion: nil)
        }
        var raised = catalogBytes(version: 13)
        #expect(throws: CatalogError.signature(.invalidSignature)) {
            try SignedCatalog.verify(catalogBytes: raised, signatureText: signature, trustedKeys: [fixture.publicKey], currentVersion: nil)
        }
        raised = bytes + [UInt8(ascii: " ")]
        #expect(throws: CatalogError.signature(.invalidSignature)) {
            try SignedCatalog.verify(catalogBytes: raised, signatureText: signature, trustedKeys: [fixture.publicKey], currentVersion: nil)
        }
    }

    @Test func rejectsTamperedTrustedComment() async throws {
        let fixture = try await MinisignFixture.make()
        defer { fixture.directory.remove() }
        let bytes = catalogBytes(version: 12)
        let signature = try await fixture.sign(bytes, trustedComment: "earshot catalog v12")
        let forged = replacingLine(2, of: signature, with: "trusted comment: earshot catalog v13")
        #expect(throws: CatalogError.signature(.invalidTrustedComment)) {
            try SignedCatalog.verify(catalogBytes: bytes, signatureText: forged, trustedKeys: [fixture.publicKey], currentVersion: nil)
        }
    }

    @Test func rejectsCatalogSignedByAnotherKey() async throws {
        let fixture = try await MinisignFixture.make()
        defer { fixture.directory.remove() }
        let (otherPair, otherKey) = try await fixture.otherKey("intruder")
        let bytes = catalogBytes(version: 12)
        let signature = try await fixture.sign(bytes, key: otherPair)
        #expect(throws: CatalogError.signature(.unknownKey(otherKey.keyIDHex))) {
            try SignedCatalog.verify(catalogBytes: bytes, signatureText: signature, trustedKeys: [fixture.publicKey], currentVersion: nil)
        }
    }

    @Test func rejectsKeyWithSameIDButOtherBytes() async throws {
        let fixture = try await MinisignFixture.make()
        defer { fixture.directory.remove() }
        let (_, otherKey) = try await fixture.otherKey("other")
        let impostor = try MinisignPublicKey(text: "untrusted comment: look-alike\n" + base64(Array("Ed".utf8) + fixture.publicKey.keyID + otherKey.keyBytes))
        let bytes = catalogBytes(version: 12)
        let signature = try await fixture.sign(bytes)
        #expect(throws: CatalogError.signature(.invalidSignature)) {
            try SignedCatalog.verify(catalogBytes: bytes, signatureText: signature, trustedKeys: [impostor], currentVersion: nil)
        }
    }

    @Test func rejectsMalformedSignatureText() async throws {
        let fixture = try await MinisignFixture.make()
        defer { fixture.directory.remove() }
        let error = #expect(throws: CatalogError.self) {
            try SignedCatalog.verify(catalogBytes: catalogBytes(version: 12), signatureText: "<html>404</html>", trustedKeys: [fixture.publicKey], currentVersion: nil)
        }
        guard case .signature(.malformedSignature) = error else {
            Issue.record("expected a malformed signature, got \(String(describing: error))")
            return
        }
    }

    @Test func rejectsRollback() async throws {
        let fixture = try await MinisignFixture.make()
        defer { fixture.directory.remove() }
        let bytes = catalogBytes(version: 4)
        let signature = try await fixture.sign(bytes)
        #expect(throws: CatalogError.rollback(current: 5, offered: 4)) {
            try SignedCatalog.verify(catalogBytes: bytes, signatureText: signature, trustedKeys: [fixture.publicKey], currentVersion: 5)
        }
    }

    @Test func acceptsEqualVersionAsUnchanged() async throws {
        let fixture = try await MinisignFixture.make()
        defer { fixture.directory.remove() }
        let bytes = catalogBytes(version: 5)
        let signature = try await fixture.sign(bytes)
        let verified = try SignedCatalog.verify(catalogBytes: bytes, signatureText: signature, trustedKeys: [fixture.publicKey], currentVersion: 5)
        #expect(verified.isUnchanged)
        #expect(verified.catalog.version == 5)
    }

    @Test func rejectsSignedButInvalidCatalog() async throws {
        let fixture = try await MinisignFixture.make()
        defer { fixture.directory.remove() }
        let invalid = Array(sampleCatalogJSON.replacingOccurrences(of: "\"license\": \"MIT\",", with: "\"license\": \"\",").utf8)
        let signature = try await fixture.sign(invalid)
        #expect(throws: CatalogError.invalidAsset(index: 0, id: "whisper-tiny.en", version: 3, problem: .emptyLicense)) {
            try SignedCatalog.verify(catalogBytes: invalid, signatureText: signature, trustedKeys: [fixture.publicKey], currentVersion: nil)
        }

        let notJSON = Array("models: all of them\n".utf8)
        let notJSONSignature = try await fixture.sign(notJSON, name: "not-json")
        let error = #expect(throws: CatalogError.self) {
            try SignedCatalog.verify(catalogBytes: notJSON, signatureText: notJSONSignature, trustedKeys: [fixture.publicKey], currentVersion: nil)
        }
        guard case .malformedJSON = error else {
            Issue.record("expected malformedJSON, got \(String(describing: error))")
            return
        }
    }

    @Test func verifiesWithKeysLoadedFromDirectory() async throws {
        let fixture = try await MinisignFixture.make()
        defer { fixture.directory.remove() }
        let keysDirectory = try TempDirectory()
        defer { keysDirectory.remove() }
        try keysDirectory.write("earshot.pub", fixture.keys.publicKeyText)
        let loaded = Minisign.loadKeys(directory: keysDirectory.path)
        #expect(loaded.problems.isEmpty)
        let bytes = catalogBytes(version: 12)
        let signature = try await fixture.sign(bytes)
        let verified = try SignedCatalog.verify(catalogBytes: bytes, signatureText: signature, trustedKeys: loaded.keys, currentVersion: 12)
        #expect(verified.isUnchanged)
    }
}
