import EarshotSystem
import EarshotWire
import Foundation

extension AssetService {
    /// Copies a verified catalog (the signed document and signature, byte for byte) and the assets
    /// it lists into the repository of `target` as one catalog artifact (``CatalogArtifact``):
    /// blobs the repository has are skipped, an asset not in the download cache is fetched from the
    /// catalog's mirrors and verified first, uploads go in chunks, and the manifest is written
    /// last, so nobody sees a manifest whose blobs are missing.
    /// - Parameters:
    ///   - source: which configured catalog source to publish; nil when only one has a catalog.
    ///   - assetIDs: only these assets (every version the catalog lists); nil: all of them.
    ///   - dryRun: check what the repository has and report what would be pushed; upload nothing.
    ///   - progress: per asset, `downloading`/`verifying` (when fetched first) and `uploading`.
    public func publish(to target: OCIReference, source: String? = nil, assetIDs: [String]? = nil, dryRun: Bool,
                        progress: @escaping @Sendable (InstallProgress) -> Void = { _ in }) async throws -> PublishReply {
        guard case .tag = target.selector else {
            throw RegistryError.invalidReference("\(target)", "publish writes a tag (oci://HOST/REPOSITORY:TAG); a digest names content that already exists")
        }
        let stored = try publishedCatalog(source)
        var entries = stored.catalog.assets
        if let assetIDs {
            let unknown = Set(assetIDs).subtracting(entries.map(\.id))
            guard unknown.isEmpty else { throw AssetError.notFound("asset \(unknown.sorted().joined(separator: ", ")) in catalog \(stored.url)") }
            entries = entries.filter { assetIDs.contains($0.id) }
        }
        var blobs: [PublishedBlob] = []
        var layers: [OCIDescriptor] = []
        for entry in entries {
            let digest = "sha256:" + entry.sha256
            let name = "\(entry.id)@\(entry.version)"
            layers.append(OCIDescriptor(mediaType: CatalogArtifact.assetMediaType, digest: digest, size: entry.size,
                                        annotations: [CatalogArtifact.assetAnnotation: name, CatalogArtifact.titleAnnotation: "\(entry.id)-\(entry.version).\(entry.format.rawValue)"]))
            if try await registry.hasBlob(target, digest: digest) {
                blobs.append(PublishedBlob(name: name, digest: digest, size: entry.size, action: .present))
                continue
            }
            if dryRun {
                blobs.append(PublishedBlob(name: name, digest: digest, size: entry.size, action: .wouldPush))
                continue
            }
            // In the download cache under its own name, kept from GC while the publish runs.
            let cached = "publish-" + entry.sha256
            let file = settings.downloadsDirectory + "/" + cached
            publishing.insert(cached)
            defer {
                publishing.remove(cached)
                Self.removeDownload(file)
            }
            try await fetchVerified(entry, into: file, progress: progress)
            try await registry.pushBlob(target, digest: digest, size: entry.size, read: RegistryClient.fileReader(file)) { done in
                progress(InstallProgress(id: nil, asset: entry.id, version: entry.version, phase: .uploading, bytesDone: done, bytesTotal: entry.size))
            }
            blobs.append(PublishedBlob(name: name, digest: digest, size: entry.size, action: .pushed))
        }
        let signature = Array(stored.signature.utf8)
        let catalog = CatalogArtifact.descriptor(stored.body, mediaType: CatalogArtifact.catalogMediaType, title: "catalog.json")
        let signed = CatalogArtifact.descriptor(signature, mediaType: CatalogArtifact.signatureMediaType, title: "catalog.json.minisig")
        let artifact = CatalogArtifact(catalog: catalog, signature: signed, assets: layers)
        let small: [(String, [UInt8], OCIDescriptor)] = [("catalog", stored.body, catalog), ("signature", signature, signed),
                                                          ("config", Array("{}".utf8), CatalogArtifact.emptyConfig)]
        for (name, bytes, descriptor) in small {
            let present = try await registry.hasBlob(target, digest: descriptor.digest)
            if !present && !dryRun { _ = try await registry.pushBlob(target, bytes: bytes) }
            blobs.append(PublishedBlob(name: name, digest: descriptor.digest, size: descriptor.size, action: present ? .present : dryRun ? .wouldPush : .pushed))
        }
        var manifestDigest: String?
        if !dryRun {
            manifestDigest = try await registry.pushManifest(target, artifact.manifest())
            log("published catalog version \(stored.catalog.version) from \(stored.url) to \(target) (\(manifestDigest ?? ""))", .info,
                ["target": "\(target)", "version": "\(stored.catalog.version)", "pushed": "\(blobs.filter { $0.action == .pushed }.count)"])
        }
        return PublishReply(id: nil, target: "\(target)", catalogVersion: stored.catalog.version, manifestDigest: manifestDigest, dryRun: dryRun, blobs: blobs)
    }

    /// The stored catalog to publish.
    private func publishedCatalog(_ source: String?) throws -> StoredCatalog {
        if let source {
            guard let stored = catalogs[source], settings.catalogURLs.contains(source) else {
                throw AssetError.notFound("a verified catalog from \(source) (the sources: \(settings.catalogURLs.joined(separator: ", ")))")
            }
            return stored
        }
        let available = settings.catalogURLs.compactMap { catalogs[$0] }
        guard available.count == 1 else {
            throw AssetError.notFound(available.isEmpty ? "a verified catalog to publish (refresh the catalog first)"
                                      : "one catalog to publish: \(available.count) sources have one, name it with --catalog")
        }
        return available[0]
    }

    /// Makes `file` a verified copy of `entry`'s download (fetched from its mirrors when missing
    /// or partial); the caller removes it after the upload.
    private func fetchVerified(_ entry: CatalogAsset, into file: String, progress: @escaping @Sendable (InstallProgress) -> Void) async throws {
        if Self.fileSize(file) != entry.size {
            let mirrors = await mirrors(for: entry)
            let request = DownloadRequest(urls: mirrors.urls, destination: file, expectedSize: entry.size, options: settings.download, access: mirrors.access)
            do {
                _ = try await downloader.download(request) { done in
                    progress(InstallProgress(id: nil, asset: entry.id, version: entry.version, phase: .downloading, bytesDone: done.bytesDone, bytesTotal: entry.size))
                }
            } catch {
                throw Self.map(error, asset: entry)
            }
        }
        progress(InstallProgress(id: nil, asset: entry.id, version: entry.version, phase: .verifying, bytesDone: entry.size, bytesTotal: entry.size))
        let digest = try await BlockingWork.run("earshot.verify") { try FileDigest.sha256(path: file) }
        guard digest == entry.sha256, Self.fileSize(file) == entry.size else {
            Self.removeDownload(file)
            throw AssetError.verificationFailed("\(entry.id)@\(entry.version): the download does not match the catalog's size and SHA-256 (got \(digest)); nothing was pushed")
        }
    }
}
