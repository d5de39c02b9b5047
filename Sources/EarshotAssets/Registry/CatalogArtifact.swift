import Foundation

/// An OCI content descriptor: what a manifest says of one blob.
public struct OCIDescriptor: Codable, Sendable, Hashable {
    public var mediaType: String
    public var digest: String
    public var size: Int64
    public var annotations: [String: String]?

    public init(mediaType: String, digest: String, size: Int64, annotations: [String: String]? = nil) {
        self.mediaType = mediaType
        self.digest = digest
        self.size = size
        self.annotations = annotations
    }
}

/// How a signed catalog travels in a registry: an OCI image manifest (artifact form) whose layers
/// are the catalog document and its minisign signature, byte for byte, followed by the assets it
/// lists (so the registry's garbage collection keeps them and `oras pull` fetches everything).
/// Media types are documented in Docs/CATALOG.md.
public struct CatalogArtifact: Sendable, Hashable {
    public static let manifestMediaType = "application/vnd.oci.image.manifest.v1+json"
    public static let artifactType = "application/vnd.earshot.catalog.v1"
    public static let catalogMediaType = "application/vnd.earshot.catalog.v1+json"
    public static let signatureMediaType = "application/vnd.earshot.catalog.signature.v1.minisign"
    public static let assetMediaType = "application/vnd.earshot.asset.v1"
    /// The OCI empty descriptor's blob, `{}`, as the config of an artifact.
    public static let emptyConfig = OCIDescriptor(mediaType: "application/vnd.oci.empty.v1+json",
                                                  digest: "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", size: 2)
    /// Largest manifest read (Distribution refuses larger ones too).
    public static let maxManifestBytes = 4 << 20
    /// Annotation naming an asset layer's `id@version`.
    public static let assetAnnotation = "org.earshot.asset"
    static let titleAnnotation = "org.opencontainers.image.title"

    public var catalog: OCIDescriptor
    public var signature: OCIDescriptor
    public var assets: [OCIDescriptor]

    public init(catalog: OCIDescriptor, signature: OCIDescriptor, assets: [OCIDescriptor]) {
        self.catalog = catalog
        self.signature = signature
        self.assets = assets
    }

    /// The manifest JSON (keys sorted, so the same artifact always has the same digest).
    public func manifest() -> [UInt8] {
        let manifest = Manifest(schemaVersion: 2, mediaType: Self.manifestMediaType, artifactType: Self.artifactType,
                                config: Self.emptyConfig, layers: [catalog, signature] + assets)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array((try? encoder.encode(manifest)) ?? Data())
    }

    /// Reads a manifest: an OCI image manifest of artifact type ``artifactType`` with exactly one
    /// catalog and one signature layer, every digest well formed and every size in range.
    public static func parse(_ body: [UInt8]) throws(RegistryError) -> CatalogArtifact {
        let manifest: Manifest
        do {
            manifest = try JSONDecoder().decode(Manifest.self, from: Data(body))
        } catch {
            throw .notACatalog("the manifest is not OCI manifest JSON (\(error))")
        }
        guard manifest.schemaVersion == 2 else { throw .notACatalog("schemaVersion \(manifest.schemaVersion), expected 2") }
        if let type = manifest.mediaType, type != manifestMediaType { throw .notACatalog("media type \(type), expected \(manifestMediaType)") }
        guard manifest.artifactType == artifactType else {
            throw .notACatalog("artifact type \(manifest.artifactType ?? "none"), expected \(artifactType)")
        }
        for layer in manifest.layers + [manifest.config] {
            guard OCIReference.isValidDigest(layer.digest) else { throw .notACatalog("layer digest \"\(layer.digest)\" is not sha256:<64 hex>") }
            guard layer.size >= 0 else { throw .notACatalog("layer \(layer.digest) has a negative size") }
        }
        let catalogs = manifest.layers.filter { $0.mediaType == catalogMediaType }
        let signatures = manifest.layers.filter { $0.mediaType == signatureMediaType }
        guard catalogs.count == 1, signatures.count == 1 else {
            throw .notACatalog("\(catalogs.count) catalog and \(signatures.count) signature layers, expected one of each")
        }
        return CatalogArtifact(catalog: catalogs[0], signature: signatures[0], assets: manifest.layers.filter { $0.mediaType == assetMediaType })
    }

    /// A descriptor for `bytes` of `mediaType` titled `title`.
    static func descriptor(_ bytes: [UInt8], mediaType: String, title: String) -> OCIDescriptor {
        OCIDescriptor(mediaType: mediaType, digest: digest(of: bytes), size: Int64(bytes.count), annotations: [titleAnnotation: title])
    }

    /// `sha256:<hex>` of `bytes`.
    public static func digest(of bytes: [UInt8]) -> String {
        "sha256:" + ((try? FileDigest.sha256(bytes: bytes)) ?? "")
    }

    private struct Manifest: Codable {
        var schemaVersion: Int
        var mediaType: String?
        var artifactType: String?
        var config: OCIDescriptor
        var layers: [OCIDescriptor]
    }
}
