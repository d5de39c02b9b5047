import Foundation

/// A catalog whose signature verified, with who signed it.
public struct VerifiedCatalog: Sendable, Hashable {
    /// The parsed and validated catalog.
    public let catalog: Catalog
    /// The signing key's id in minisign's display form.
    public let keyIDHex: String
    /// The signature's trusted comment.
    public let trustedComment: String
    /// The catalog's version equals the current one: nothing new (the caller may keep its copy).
    public let isUnchanged: Bool
}

/// Verification of a downloaded catalog and its minisign signature.
public enum SignedCatalog {
    /// Accepts `catalogBytes` only if `signatureText` (a `.minisig`) verifies with one of
    /// `trustedKeys`, the JSON parses, its version is not lower than `currentVersion` (equal is
    /// accepted and reported as ``VerifiedCatalog/isUnchanged``), and it validates. The JSON is not
    /// looked at before the signature has verified.
    public static func verify(catalogBytes: some ContiguousBytes, signatureText: String, trustedKeys: [MinisignPublicKey], currentVersion: Int64?) throws(CatalogError) -> VerifiedCatalog {
        let signature: VerifiedSignature
        do {
            signature = try Minisign.verify(catalogBytes, signature: signatureText, trustedKeys: trustedKeys)
        } catch {
            throw .signature(error)
        }
        let catalog = try Catalog.parse(catalogBytes.withUnsafeBytes { Data($0) })
        if let currentVersion, catalog.version < currentVersion {
            throw .rollback(current: currentVersion, offered: catalog.version)
        }
        try catalog.validate()
        return VerifiedCatalog(
            catalog: catalog,
            keyIDHex: signature.keyIDHex,
            trustedComment: signature.trustedComment,
            isUnchanged: catalog.version == currentVersion
        )
    }
}
