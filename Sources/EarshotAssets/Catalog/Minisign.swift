import CCrypto
import EarshotSystem
import Foundation

/// Why a minisign public key or signature was refused.
public enum SignatureError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The public key text is not a minisign Ed25519 public key (the reason says what is wrong).
    case malformedPublicKey(String)
    /// The signature text is not a minisign signature (the reason says what is wrong).
    case malformedSignature(String)
    /// The signature uses an algorithm other than `Ed` (legacy) or `ED` (prehashed).
    case unsupportedAlgorithm(String)
    /// No trusted key has the signature's key id (minisign's display form, e.g. `775EF6B717B16331`).
    case unknownKey(String)
    /// The signature over the message does not verify with the trusted key: the message was changed
    /// or was signed by a different key that shares the id.
    case invalidSignature
    /// The message signature is fine but the global signature over it and the trusted comment is
    /// not: the trusted comment was changed.
    case invalidTrustedComment
    /// OpenSSL failed for a reason other than a bad signature (allocation, missing algorithm).
    case openSSL(function: String, detail: String)

    public var description: String {
        switch self {
        case .malformedPublicKey(let reason): "malformed minisign public key: \(reason)"
        case .malformedSignature(let reason): "malformed minisign signature: \(reason)"
        case .unsupportedAlgorithm(let algorithm): "unsupported minisign signature algorithm \"\(algorithm)\" (expected Ed or ED)"
        case .unknownKey(let keyID): "signed by key \(keyID), which is not a trusted key"
        case .invalidSignature: "signature verification failed: the signed data was changed or signed by another key"
        case .invalidTrustedComment: "the trusted comment does not match its global signature"
        case .openSSL(let function, let detail): "\(function) failed: \(detail)"
        }
    }
}

/// A minisign Ed25519 public key.
public struct MinisignPublicKey: Sendable, Hashable, CustomStringConvertible {
    /// The 8-byte key id as stored in keys and signatures.
    public let keyID: [UInt8]
    /// The key id as minisign prints it: the stored bytes read as a little-endian 64-bit number,
    /// 16 uppercase hex digits (minisign itself drops leading zeros).
    public let keyIDHex: String
    /// The 32-byte Ed25519 public key.
    public let keyBytes: [UInt8]

    /// Parses a `.pub` file (`untrusted comment: …` line, then the base64 key line) or a bare base64
    /// key line as given to `minisign -P`.
    public init(text: String) throws(SignatureError) {
        let lines = MinisignText.lines(text).filter { !MinisignText.isBlank($0) }
        guard let first = lines.first else { throw .malformedPublicKey("no key line") }
        let keyLine: [UInt8]
        if MinisignText.hasPrefix(first, MinisignText.untrustedPrefix) {
            guard lines.count >= 2 else { throw .malformedPublicKey("no key line after the untrusted comment") }
            guard lines.count == 2 else { throw .malformedPublicKey("unexpected text after the key line") }
            keyLine = lines[1]
        } else {
            guard lines.count == 1 else { throw .malformedPublicKey("expected one base64 line or an untrusted comment line followed by one") }
            keyLine = first
        }
        guard let decoded = MinisignText.base64(keyLine) else { throw .malformedPublicKey("the key line is not base64") }
        guard decoded.count == 2 + 8 + 32 else { throw .malformedPublicKey("the key is \(decoded.count) bytes, expected 42") }
        guard decoded[0] == UInt8(ascii: "E"), decoded[1] == UInt8(ascii: "d") else {
            throw .malformedPublicKey("algorithm \"\(MinisignText.printable(decoded[0..<2]))\" is not Ed")
        }
        self.init(keyID: Array(decoded[2..<10]), keyBytes: Array(decoded[10..<42]))
    }

    private init(keyID: [UInt8], keyBytes: [UInt8]) {
        self.keyID = keyID
        self.keyIDHex = MinisignText.keyIDHex(keyID)
        self.keyBytes = keyBytes
    }

    /// The bare base64 key line (what `minisign -P` takes).
    public var base64: String { Data([UInt8(ascii: "E"), UInt8(ascii: "d")] + keyID + keyBytes).base64EncodedString() }

    public var description: String { "minisign key \(keyIDHex)" }
}

/// A parsed (not yet verified) `.minisig` signature.
public struct MinisignSignature: Sendable, Hashable {
    /// True for `ED` (signature over the BLAKE2b-512 hash of the message, minisign's default since
    /// 0.10), false for the legacy `Ed` (signature over the message itself).
    public let isPrehashed: Bool
    /// The 8-byte id of the signing key.
    public let keyID: [UInt8]
    /// The key id in minisign's display form (see ``MinisignPublicKey/keyIDHex``).
    public let keyIDHex: String
    /// The 64-byte Ed25519 signature over the message (or its hash).
    public let signature: [UInt8]
    /// The untrusted comment: not covered by any signature, for display only.
    public let untrustedComment: String
    /// The trusted comment exactly as signed (UTF-8 bytes after `trusted comment: `).
    public let trustedCommentBytes: [UInt8]
    /// The 64-byte global signature over `signature ‖ trustedCommentBytes`.
    public let globalSignature: [UInt8]

    /// The trusted comment as text. Only meaningful after ``Minisign/verify(_:signature:trustedKeys:)``.
    public var trustedComment: String { String(decoding: trustedCommentBytes, as: UTF8.self) }

    /// Parses the four lines of a `.minisig` file (blank lines are ignored; CRLF is accepted).
    public init(text: String) throws(SignatureError) {
        let lines = MinisignText.lines(text).filter { !MinisignText.isBlank($0) }
        guard lines.count == 4 else { throw .malformedSignature("expected 4 lines, found \(lines.count)") }
        guard MinisignText.hasPrefix(lines[0], MinisignText.untrustedPrefix) else {
            throw .malformedSignature("the first line does not start with \"untrusted comment:\"")
        }
        guard let body = MinisignText.base64(lines[1]) else { throw .malformedSignature("the signature line is not base64") }
        guard body.count == 2 + 8 + 64 else { throw .malformedSignature("the signature line is \(body.count) bytes, expected 74") }
        switch (body[0], body[1]) {
        case (UInt8(ascii: "E"), UInt8(ascii: "d")): isPrehashed = false
        case (UInt8(ascii: "E"), UInt8(ascii: "D")): isPrehashed = true
        default: throw .unsupportedAlgorithm(MinisignText.printable(body[0..<2]))
        }
        guard MinisignText.hasPrefix(lines[2], MinisignText.trustedPrefix) else {
            throw .malformedSignature("the third line does not start with \"trusted comment: \"")
        }
        guard let global = MinisignText.base64(lines[3]) else { throw .malformedSignature("the global signature line is not base64") }
        guard global.count == 64 else { throw .malformedSignature("the global signature is \(global.count) bytes, expected 64") }
        keyID = Array(body[2..<10])
        keyIDHex = MinisignText.keyIDHex(keyID)
        signature = Array(body[10..<74])
        untrustedComment = String(decoding: lines[0].dropFirst(MinisignText.untrustedPrefix.count), as: UTF8.self)
            .trimmingCharacters(in: .whitespaces)
        trustedCommentBytes = Array(lines[2].dropFirst(MinisignText.trustedPrefix.count))
        globalSignature = global
    }
}

/// A signature that verified: which trusted key made it and the (now authenticated) trusted comment.
public struct VerifiedSignature: Sendable, Hashable {
    /// The signing key's id in minisign's display form.
    public let keyIDHex: String
    /// The trusted comment (minisign's default: `timestamp:<unix time>\tfile:<name>`, followed by
    /// `\thashed` for the prehashed form).
    public let trustedComment: String
    /// Whether the signature was the prehashed `ED` form.
    public let isPrehashed: Bool
}

/// minisign signature verification with OpenSSL's Ed25519 and BLAKE2b-512.
public enum Minisign {
    /// Verifies `signature` (the text of a `.minisig` file) over `message` with one of
    /// `trustedKeys`: the signature over the message (or its BLAKE2b-512 hash for `ED`) and the global
    /// signature over the signature and trusted comment must both verify.
    public static func verify(_ message: some ContiguousBytes, signature: String, trustedKeys: [MinisignPublicKey]) throws(SignatureError) -> VerifiedSignature {
        let parsed = try MinisignSignature(text: signature)
        let candidates = trustedKeys.filter { $0.keyID == parsed.keyID }
        guard !candidates.isEmpty else { throw .unknownKey(parsed.keyIDHex) }

        let signedKey: Result<MinisignPublicKey, SignatureError> = message.withUnsafeBytes { buffer in
            Result { () throws(SignatureError) -> MinisignPublicKey in
                let digest: [UInt8]? = parsed.isPrehashed ? try OpenSSLCrypto.blake2b512(buffer) : nil
                for key in candidates {
                    let valid: Bool
                    if let digest {
                        valid = try OpenSSLCrypto.ed25519Verify(signature: parsed.signature, message: digest, publicKey: key.keyBytes)
                    } else {
                        valid = try OpenSSLCrypto.ed25519Verify(signature: parsed.signature, message: buffer, publicKey: key.keyBytes)
                    }
                    if valid { return key }
                }
                throw .invalidSignature
            }
        }
        let key = try signedKey.get()

        let global = parsed.signature + parsed.trustedCommentBytes
        let globalValid = try OpenSSLCrypto.ed25519Verify(signature: parsed.globalSignature, message: global, publicKey: key.keyBytes)
        guard globalValid else { throw .invalidTrustedComment }
        return VerifiedSignature(keyIDHex: key.keyIDHex, trustedComment: parsed.trustedComment, isPrehashed: parsed.isPrehashed)
    }

    /// Loads every `*.pub` file in `directory` (sorted by name; hidden files skipped). Files that do
    /// not parse, and a missing or unreadable directory, are reported in `problems` as
    /// `"<path>: <reason>"`; identical keys found twice are kept once. Blocking file I/O.
    public static func loadKeys(directory: String) -> (keys: [MinisignPublicKey], problems: [String]) {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) else {
            return ([], ["\(directory): no such directory"])
        }
        guard isDirectory.boolValue else { return ([], ["\(directory): not a directory"]) }
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            return ([], ["\(directory): cannot list the directory"])
        }
        var keys: [MinisignPublicKey] = []
        var problems: [String] = []
        for name in names.sorted() where name.hasSuffix(".pub") && !name.hasPrefix(".") {
            let path = directory.hasSuffix("/") ? directory + name : directory + "/" + name
            guard let handle = FileHandle(forReadingAtPath: path) else {
                problems.append("\(path): cannot open")
                continue
            }
            let data = (try? handle.read(upToCount: maximumKeyFileSize + 1)) ?? Data()
            try? handle.close()
            guard data.count <= maximumKeyFileSize else {
                problems.append("\(path): larger than \(maximumKeyFileSize) bytes, not a public key")
                continue
            }
            guard let text = String(data: data, encoding: .utf8) else {
                problems.append("\(path): not UTF-8 text")
                continue
            }
            do {
                let key = try MinisignPublicKey(text: text)
                if !keys.contains(key) { keys.append(key) }
            } catch {
                problems.append("\(path): \(error)")
            }
        }
        return (keys, problems)
    }

    /// Key files larger than this are refused by ``loadKeys(directory:)``.
    static let maximumKeyFileSize = 64 * 1024
}

/// Line handling for minisign's text formats, on UTF-8 bytes so that the trusted comment is exactly
/// the signed bytes (only `\n` separates lines; a trailing `\r` is dropped, like minisign does).
private enum MinisignText {
    static let untrustedPrefix = Array("untrusted comment:".utf8)
    static let trustedPrefix = Array("trusted comment: ".utf8)

    static func lines(_ text: String) -> [[UInt8]] {
        Array(text.utf8).split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map { line in
            var line = Array(line)
            while line.last == UInt8(ascii: "\r") { line.removeLast() }
            return line
        }
    }

    static func isBlank(_ line: [UInt8]) -> Bool {
        line.allSatisfy { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
    }

    static func hasPrefix(_ line: [UInt8], _ prefix: [UInt8]) -> Bool {
        line.count >= prefix.count && line.prefix(prefix.count).elementsEqual(prefix)
    }

    /// Strict base64 of one line (surrounding spaces and tabs tolerated).
    static func base64(_ line: [UInt8]) -> [UInt8]? {
        let text = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespaces)
        guard !text.isEmpty, let data = Data(base64Encoded: text) else { return nil }
        return Array(data)
    }

    /// minisign's display form of a key id: the bytes as a little-endian number in uppercase hex.
    static func keyIDHex(_ keyID: [UInt8]) -> String {
        keyID.reversed().map { byte in
            let digits = Array("0123456789ABCDEF")
            return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
        }.joined()
    }

    static func printable(_ bytes: ArraySlice<UInt8>) -> String {
        String(bytes.map { (0x20..<0x7F).contains($0) ? Character(UnicodeScalar($0)) : "?" })
    }
}

/// The OpenSSL calls minisign verification needs; every result is checked here, naming the function.
private enum OpenSSLCrypto {
    /// Ed25519 verification of `signature` over `message`: true if valid, false if not, throws when
    /// OpenSSL itself fails.
    static func ed25519Verify(signature: [UInt8], message: UnsafeRawBufferPointer, publicKey: [UInt8]) throws(SignatureError) -> Bool {
        defer { ERR_clear_error() }
        guard let key = publicKey.withUnsafeBufferPointer({ EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, $0.baseAddress, $0.count) }) else {
            throw failure("EVP_PKEY_new_raw_public_key")
        }
        defer { EVP_PKEY_free(key) }
        guard let context = EVP_MD_CTX_new() else { throw failure("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, nil, nil, key) == 1 else { throw failure("EVP_DigestVerifyInit") }
        // OpenSSL wants a non-null pointer even for an empty message.
        var empty: UInt8 = 0
        let result = withUnsafePointer(to: &empty) { emptyPointer in
            signature.withUnsafeBufferPointer { signatureBytes in
                let messageBytes = message.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? emptyPointer
                return EVP_DigestVerify(context, signatureBytes.baseAddress, signatureBytes.count, messageBytes, message.count)
            }
        }
        switch result {
        case 1: return true
        case 0: return false
        default: throw failure("EVP_DigestVerify")
        }
    }

    /// Ed25519 verification of `signature` over the bytes of `message`.
    static func ed25519Verify(signature: [UInt8], message: [UInt8], publicKey: [UInt8]) throws(SignatureError) -> Bool {
        let outcome = message.withUnsafeBytes { buffer in
            Result { () throws(SignatureError) in try ed25519Verify(signature: signature, message: buffer, publicKey: publicKey) }
        }
        return try outcome.get()
    }

    /// BLAKE2b-512 of `message` (minisign's prehash).
    static func blake2b512(_ message: UnsafeRawBufferPointer) throws(SignatureError) -> [UInt8] {
        defer { ERR_clear_error() }
        guard let algorithm = EVP_blake2b512() else { throw failure("EVP_blake2b512") }
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        var empty: UInt8 = 0
        let status = withUnsafePointer(to: &empty) { emptyPointer in
            digest.withUnsafeMutableBufferPointer { out in
                EVP_Digest(message.baseAddress ?? UnsafeRawPointer(emptyPointer), message.count, out.baseAddress, &length, algorithm, nil)
            }
        }
        guard status == 1, length == 64 else { throw failure("EVP_Digest(BLAKE2b-512)") }
        return Array(digest.prefix(64))
    }

    /// The error for a failed OpenSSL call, with OpenSSL's own reason when it left one.
    static func failure(_ function: String) -> SignatureError {
        let code = ERR_get_error()
        guard code != 0 else { return .openSSL(function: function, detail: "no OpenSSL error recorded") }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        let detail = String(cBuffer: buffer)
        return .openSSL(function: function, detail: detail)
    }
}
