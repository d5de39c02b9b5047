import EarshotAssets
import Foundation
import TestSupport
import Testing

/// A temp dir with a fresh minisign key pair made by the real `minisign`.
struct MinisignFixture {
    let directory: TempDirectory
    let tool: MinisignTool
    let keys: MinisignTool.KeyPair
    let publicKey: MinisignPublicKey

    static func make() async throws -> MinisignFixture {
        let directory = try TempDirectory()
        let tool = try MinisignTool()
        let keys = try await tool.generateKey(named: "signer", in: directory)
        return MinisignFixture(directory: directory, tool: tool, keys: keys, publicKey: try MinisignPublicKey(text: keys.publicKeyText))
    }

    /// Another key pair in the same dir.
    func otherKey(_ name: String) async throws -> (MinisignTool.KeyPair, MinisignPublicKey) {
        let pair = try await tool.generateKey(named: name, in: directory)
        return (pair, try MinisignPublicKey(text: pair.publicKeyText))
    }

    /// Writes `bytes` to `name` and signs it; returns the signature text.
    func sign(_ bytes: [UInt8], name: String = "message", legacy: Bool = false, trustedComment: String? = nil, key: MinisignTool.KeyPair? = nil) async throws -> String {
        let path = directory.file(name)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return try await tool.sign(path, with: key ?? keys, legacy: legacy, trustedComment: trustedComment, in: directory)
    }
}

/// Replaces line `index` (0-based, `\n`-separated) of a signature text.
func replacingLine(_ index: Int, of text: String, with line: String) -> String {
    var lines = text.components(separatedBy: "\n")
    lines[index] = line
    return lines.joined(separator: "\n")
}

/// The decoded base64 line `index` of a minisign text.
func decodedLine(_ index: Int, of text: String) -> [UInt8] {
    Array(Data(base64Encoded: text.components(separatedBy: "\n")[index]) ?? Data())
}

func base64(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }

@Suite("Minisign")
struct MinisignTests {
    let message = Array(#"{"format":1,"version":7,"assets":[]}"#.utf8)

    @Test func publicKeyParsesPubFileAndBareLine() async throws {
        let fixture = try await MinisignFixture.make()
        defer { fixture.directory.remove() }
        let lines = fixture.keys.publicKeyText.components(separatedBy: "\n")
        let bare = try MinisignPublicKey(text: lines[1])
        #expect(bare == fixture.publicKey)
        #expect(fixture.publicKey.keyID.count == 8)
        #expect(fixture.publicKey.keyBytes.count == 32)
        #expect(fixture.publicKey.base64 == lines[1])
        // minisign prints the id as an unpadded uppercase hex number in the untrusted comment.
        let printed = try #require(lines[0].split(separator: " ").last)
        #expect(fixture.publicKey.keyIDHex == String(repeating: "0", count: 16 - printed.count) + printed)
        #expect(try MinisignPublicKey(text: fixture.keys.publicKeyText.replacingOccurrences(of: "\n", with: "\r\n")) == fixture.publicKey)
    }

    @Test(arguments: [false, true])
    func verifiesSignature(legacy: Bool) async throws {
        let fixture = try await MinisignFixture.make()
        defer { fixture.directory.remove() }
        let signature = try await fixture.sign(message, legacy: legacy, trustedComment: "earshot catalog 7")
        #expect(decodedLine(1, of: signature).prefix(2).elementsEqual((legacy ? "Ed" : "ED").utf8))
        let verified = try Minisign.verify(message, signature: signature, trustedKeys: [fixture.publicKey])
        #expect(verified.keyIDHex == fixture.publicKey.keyIDHex)
        #expect(verified.trustedComment == "earshot catalog 7")
        #expect(verified.isPrehashed == !legacy)
        // Data works as well as [UInt8].
        _ = try Minisign.verify(Data(message), signature: signature, trustedKeys: [fixture.publicKey])
    }

    @Test func defaultTrustedCommentHasTimestampAndFile() async throws {
        let fixture = try await MinisignFixture.make()
        defer { fixture.directory.remove() }
        let signature = try await fixture.sign(message, name: "catalog.json")
        let verified = try Minisign.verify(message, signature: signature, trustedKeys: [fixture.publicKey])
        #expect(verified.trustedComment.hasPrefix("timestamp:"))
        // minisign 0.11 appends "\thashed" for the prehashed form.
        #expect(verified.trustedComment.contains("\tfile:catalog.json"))
    }

    @Test(arguments: [false, true])
    func verifiesEmptyMessage(legacy: Bool) async throws {
        let fixture = try await MinisignFixture.make()
        defer { fixture.directory.remove() }
        let signature = try await fixture.sign([], legacy: legacy)
        _ = try Minisign.verify([UInt8](), signature: signature, trustedKeys: [fixture.publicKey])
        #expect(throws: SignatureError.invalidSignature) {
            try Minisign.verify([0], signature: signature, trustedKeys: [fixture.publicKey])
        }
    }

    @Test func acceptsCRLFSignature() async throws {
        let fixture = try await MinisignFixture.make()
        defer { fixture.directory.remove() }
        let signature = try await fixture.sign(message, trustedComment: "crlf")
        let verified = try Minisign.verify(message, signature: signature.replacingOccurrences(of: "\n", with: "\r\n"), trustedKeys: [fixture.publicKey])
        #expect(verified.trustedComment == "crlf")
    }

    @Test(arguments: [false, true])
    func rejectsTamperedMessage(legacy: Bool) async throws {
        let fixture = try await MinisignFixture.make()
        defer { fixture.directory.remove() }
        let signature = try await fixture.sign(message, legacy: legacy)
        for index in [0, message.count / 2, message.count - 1] {
            var tampered = message
            tampered[index] ^= 0x01
            #expect(throws: SignatureError.invalidSignature) {
                try Minisign.verify(tampered, signature: signature, trustedKeys: [fixture.publicKey])
            }
        }
        #expect(throws: SignatureError.invalidSignature) {
            try Minisign.verify(message + [0x0A], signature: signature, trustedKeys: [fixture.publicKey])
        }
    }

    @Test(arguments: [false, true])
    func rejectsTamperedTrustedComment(legacy: Bool) async throws {
        let fixture = try await MinisignFixture.make()
        defer { fixture.directory.remove() }
        let signature = try await fixture.sign(message, legacy: legacy, trustedComment: "version 7")
        for comment in ["trusted comment: version 8", "trusted comment: version 7 ", "trusted comment: "] {
            #expect(throws: SignatureError.invalidTrustedComment) {
                try Minisign.verify(message, signature: replacingLine(2, of: signature, with: comment), trustedKeys: [fixture.publicKey])
            }
        }
    }

    @Test func rejectsTamperedSignatureBytes() async throws {
        let fixture = try await MinisignFixture.make()
        defer { fixture.directory.remove() }
        let signature = try await fixture.sign(message)
        var body = decodedLine(1, of: signature)
        body[40] ^= 0x80
        #expect(throws: SignatureError.invalidSignature) {
            try Minisign.verify(message, signature: replacingLine(1, of: signature, with: base64(body)), trustedKeys: [fixture.publicKey])
        }
        var global = decodedLine(3, of: signature)
        global[5] ^= 0x01
        #expect(throws: SignatureError.invalidTrustedComment) {
            try Minisign.verify(message, signature: replacingLine(3, of: signature, with: base64(global)), trustedKeys: [fixture.publicKey])
        }
    }

    @Test func rejectsSwitchedAlgorithm() async throws {
        // A prehashed signature relabelled as legacy (and vice versa) must not verify.
        let fixture = try await MinisignFixture.make()
        defer { fixture.directory.remove() }
        for legacy in [false, true] {
            let signature = try await fixture.sign(message, legacy: legacy)
            var body = decodedLine(1, of: signature)
            body[1] = legacy ? UInt8(ascii: "D") : UInt8(ascii: "d")
            #expect(throws: SignatureError.invalidSignature) {
                try Minisign.verify(message, signature: replacingLine(1, of: signature, with: base64(body)), trustedKeys: [fixture.publicKey])
            }
        }
    }

    @Test func rejectsUnknownKey() async throws {
        let fixture = try await MinisignFixture.make()
        defer { fixture.directory.remove() }
        let (otherPair, otherKey) = try await fixture.otherKey("other")
        let signature = try await fixture.sign(message, key: otherPair)
        #expect(throws: SignatureError.unknownKey(otherKey.keyIDHex)) {
            try Minisign.verify(message, signature: signature, trustedKeys: [fixture.publicKey])
        }
        #expect(throws: SignatureError.unknownKey(otherKey.keyIDHex)) {
            try Minisign.verify(message, signature: signature, trustedKeys: [])
        }
        _ = try Minisign.verify(message, signature: signature, trustedKeys: [fixture.publicKey, otherKey])
    }

    @Test func rejectsKeyWithSameIDButOtherBytes() async throws {
        let fixture = try await MinisignFixture.make()
        defer { fixture.directory.remove() }
        let (_, otherKey) = try await fixture.otherKey("other")
        let impostor = try MinisignPublicKey(text: base64(Array("Ed".utf8) + fixture.publicKey.keyID + otherKey.keyBytes))
        #expect(impostor.keyIDHex == fixture.publicKey.keyIDHex)
        let signature = try await fixture.sign(message)
        #expect(throws: SignatureError.invalidSignature) {
            try Minisign.verify(message, signature: signature, trustedKeys: [impostor])
        }
        // With both trusted, the genuine key is found.
        let verified = try Minisign.verify(message, signature: signature, trustedKeys: [impostor, fixture.publicKey])
        #expect(verified.keyIDHex == fixture.publicKey.keyIDHex)
    }

    @Test func rejectsMalformedPublicKeys() throws {
        let id = [UInt8](repeating: 7, count: 8)
        let key = [UInt8](repeating: 9, count: 32)
        let texts = [
            "",
            "\n\n",
            "untrusted comment: minisign public key 0707070707070707",
            "untrusted comment: x\n!!!not base64!!!",
            base64(Array("Ed".utf8) + id + key.dropLast()),
            base64(Array("Ed".utf8) + id + key + [0]),
            base64(Array("ED".utf8) + id + key),
            "untrusted comment: x\n\(base64(Array("Ed".utf8) + id + key))\nextra",
            "\(base64(Array("Ed".utf8) + id + key))\n\(base64(Array("Ed".utf8) + id + key))",
        ]
        for text in texts {
            let error = #expect(throws: SignatureError.self, "\(text.debugDescription)") { try MinisignPublicKey(text: text) }
            guard case .malformedPublicKey = error else {
                Issue.record("\(text.debugDescription): \(String(describing: error))")
                continue
            }
        }
        let good = try MinisignPublicKey(text: "untrusted comment: x\n\(base64(Array("Ed".utf8) + id + key))\n\n")
        #expect(good.keyIDHex == "0707070707070707")
    }

    @Test func rejectsMalformedSignatures() async throws {
        let fixture = try await MinisignFixture.make()
        defer { fixture.directory.remove() }
        let signature = try await fixture.sign(message)
        let lines = signature.components(separatedBy: "\n")
        let body = decodedLine(1, of: signature)
        let global = decodedLine(3, of: signature)
        let variants = [
            "",
            lines.dropLast(2).joined(separator: "\n"),
            [lines[0], lines[1]].joined(separator: "\n"),
            replacingLine(0, of: signature, with: "comment: x"),
            replacingLine(1, of: signature, with: "not*base64"),
            replacingLine(1, of: signature, with: base64(Array(body.dropLast()))),
            replacingLine(1, of: signature, with: base64(body + [0])),
            replacingLine(2, of: signature, with: "trusted comment:x"),
            replacingLine(2, of: signature, with: "untrusted comment: x"),
            replacingLine(3, of: signature, with: base64(Array(global.dropLast()))),
            replacingLine(3, of: signature, with: "%%%"),
            signature + "\nextra line",
        ]
        for text in variants {
            let error = #expect(throws: SignatureError.self, "\(text.debugDescription)") {
                try Minisign.verify(message, signature: text, trustedKeys: [fixture.publicKey])
            }
            guard case .malformedSignature = error else {
                Issue.record("\(text.debugDescription): \(String(describing: error))")
                continue
            }
        }
    }

    @Test func rejectsUnsupportedAlgorithm() async throws {
        let fixture = try await MinisignFixture.make()
        defer { fixture.directory.remove() }
        let signature = try await fixture.sign(message)
        var body = decodedLine(1, of: signature)
        body[0] = UInt8(ascii: "X")
        body[1] = UInt8(ascii: "y")
        #expect(throws: SignatureError.unsupportedAlgorithm("Xy")) {
            try Minisign.verify(message, signature: replacingLine(1, of: signature, with: base64(body)), trustedKeys: [fixture.publicKey])
        }
    }

    @Test func parsedSignatureExposesKeyAndComments() async throws {
        let fixture = try await MinisignFixture.make()
        defer { fixture.directory.remove() }
        let text = try await fixture.sign(message, trustedComment: "tc")
        let parsed = try MinisignSignature(text: text)
        #expect(parsed.keyIDHex == fixture.publicKey.keyIDHex)
        #expect(parsed.isPrehashed)
        #expect(parsed.trustedComment == "tc")
        #expect(parsed.untrustedComment == "signature from minisign secret key")
    }

    @Test func loadsKeysFromDirectory() async throws {
        let fixture = try await MinisignFixture.make()
        defer { fixture.directory.remove() }
        let (_, otherKey) = try await fixture.otherKey("other")
        let keysDirectory = try TempDirectory()
        defer { keysDirectory.remove() }
        try keysDirectory.write("10-signer.pub", fixture.keys.publicKeyText)
        try keysDirectory.write("20-other.pub", otherKey.base64 + "\n")
        try keysDirectory.write("30-copy.pub", fixture.keys.publicKeyText)
        try keysDirectory.write("40-broken.pub", "untrusted comment: nothing here\n")
        try keysDirectory.write("notes.txt", "not a key")
        try keysDirectory.write(".hidden.pub", "garbage")
        let loaded = Minisign.loadKeys(directory: keysDirectory.path)
        #expect(loaded.keys == [fixture.publicKey, otherKey])
        #expect(loaded.problems.count == 1)
        #expect(loaded.problems.first?.hasPrefix(keysDirectory.file("40-broken.pub") + ": malformed minisign public key") == true)

        let signature = try await fixture.sign(message)
        _ = try Minisign.verify(message, signature: signature, trustedKeys: loaded.keys)

        let missing = Minisign.loadKeys(directory: keysDirectory.file("absent"))
        #expect(missing.keys.isEmpty)
        #expect(missing.problems == [keysDirectory.file("absent") + ": no such directory"])
    }

    @Test func errorsDescribeThemselves() {
        #expect(SignatureError.unknownKey("775EF6B717B16331").description.contains("775EF6B717B16331"))
        #expect(SignatureError.invalidTrustedComment.description.contains("trusted comment"))
    }
}
