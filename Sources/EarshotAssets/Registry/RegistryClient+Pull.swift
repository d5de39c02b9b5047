import Foundation

/// A catalog artifact read from a registry: the signed document and signature, unverified yet.
public struct PulledCatalog: Sendable, Hashable {
    public var body: [UInt8]
    public var signature: [UInt8]
    /// The manifest's digest: the validator a later pull compares (`sha256:…`).
    public var manifestDigest: String
    public var artifact: CatalogArtifact
}

extension RegistryClient {
    /// The manifest's digest as the registry reports it (`HEAD`, `Docker-Content-Digest`); nil
    /// when it sends none. A `HEAD` is not a pull, so registries that meter pulls do not count it.
    public func manifestDigest(_ reference: OCIReference) async throws(RegistryError) -> String? {
        let url = await base(reference) + "manifests/" + reference.selectorText
        let redirects = await redirectProtocols(reference)
        let response = try await run(MemoryRequest(method: "HEAD", url: url, headers: ["Accept: " + CatalogArtifact.manifestMediaType],
                                                     redirectProtocols: redirects), to: reference).get()
        try Self.expect(response, [200], url: url)
        return response.header("docker-content-digest").flatMap { OCIReference.isValidDigest($0) ? $0 : nil }
    }

    /// Reads the catalog artifact at `reference`; nil when its manifest digest is still
    /// `knownDigest` (nothing was downloaded). Every byte is checked against its digest and size.
    public func pullCatalog(_ reference: OCIReference, knownDigest: String?, maxCatalogBytes: Int) async throws(RegistryError) -> PulledCatalog? {
        if let knownDigest {
            if case .digest(let pinned) = reference.selector, pinned == knownDigest { return nil }
            if let current = try await manifestDigest(reference), current == knownDigest { return nil }
        }
        let url = await base(reference) + "manifests/" + reference.selectorText
        let redirects = await redirectProtocols(reference)
        let response = try await run(MemoryRequest(method: "GET", url: url, headers: ["Accept: " + CatalogArtifact.manifestMediaType],
                                                     maxResponseBytes: CatalogArtifact.maxManifestBytes, redirectProtocols: redirects),
                                     to: reference).get()
        try Self.expect(response, [200], url: url)
        let digest = CatalogArtifact.digest(of: response.body)
        if case .digest(let pinned) = reference.selector, pinned != digest {
            throw .mismatch("the manifest of \(reference) hashes to \(digest)")
        }
        if let announced = response.header("docker-content-digest"), announced != digest {
            throw .mismatch("the manifest of \(reference) hashes to \(digest), the registry says \(announced)")
        }
        if knownDigest == digest { return nil }
        let artifact = try CatalogArtifact.parse(response.body)
        guard artifact.catalog.size <= Int64(maxCatalogBytes), artifact.signature.size <= 64 << 10 else {
            throw .notACatalog("the catalog (\(artifact.catalog.size) bytes) or its signature (\(artifact.signature.size)) is larger than accepted")
        }
        let body = try await blob(reference, artifact.catalog)
        let signature = try await blob(reference, artifact.signature)
        return PulledCatalog(body: body, signature: signature, manifestDigest: digest, artifact: artifact)
    }

    /// A small blob in memory, refused unless it has exactly the descriptor's size and digest.
    func blob(_ reference: OCIReference, _ descriptor: OCIDescriptor) async throws(RegistryError) -> [UInt8] {
        let url = await base(reference) + "blobs/" + descriptor.digest
        let redirects = await redirectProtocols(reference)
        let response = try await run(MemoryRequest(method: "GET", url: url, maxResponseBytes: Int(descriptor.size),
                                                     redirectProtocols: redirects), to: reference).get()
        try Self.expect(response, [200], url: url)
        guard Int64(response.body.count) == descriptor.size else {
            throw .mismatch("blob \(descriptor.digest) is \(response.body.count) bytes, the manifest says \(descriptor.size)")
        }
        let digest = CatalogArtifact.digest(of: response.body)
        guard digest == descriptor.digest else { throw .mismatch("blob \(descriptor.digest) hashes to \(digest)") }
        return response.body
    }

    /// The URL and access (authorization, redirect rules) for downloading blob `digest` from
    /// `reference`'s repository with the ``Downloader``: a `HEAD` first answers any challenge and
    /// confirms the registry has it.
    public func blobMirror(_ reference: OCIReference, digest: String) async throws(RegistryError) -> (url: String, access: MirrorAccess) {
        let url = await base(reference) + "blobs/" + digest
        let redirects = await redirectProtocols(reference)
        let response = try await run(MemoryRequest(method: "HEAD", url: url, redirectProtocols: redirects), to: reference).get()
        try Self.expect(response, [200], url: url)
        let headers = authorization(reference, push: false).map { ["Authorization: " + $0] } ?? []
        return (url, MirrorAccess(headers: headers, redirectProtocols: redirects))
    }

    /// Throws unless the response's status is one of `accepted`.
    static func expect(_ response: MemoryResponse, _ accepted: Set<Int>, url: String) throws(RegistryError) {
        guard !accepted.contains(response.status) else { return }
        let message = (try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
            .flatMap { ($0["errors"] as? [[String: Any]])?.first?["message"] as? String } ?? ""
        if (500...599).contains(response.status) || response.status == 429 || response.status == 408 {
            throw .transport(url: url, .httpStatus(response.status))
        }
        throw .status(url: url, response.status, String(message.prefix(200)))
    }
}
