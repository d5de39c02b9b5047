import Foundation
#if canImport(Glibc)
import Glibc
#endif

extension RegistryClient {
    /// Whether the repository already has blob `digest` (`HEAD`).
    public func hasBlob(_ reference: OCIReference, digest: String) async throws(RegistryError) -> Bool {
        let url = await base(reference) + "blobs/" + digest
        let redirects = await redirectProtocols(reference)
        let response = try await run(MemoryRequest(method: "HEAD", url: url, redirectProtocols: redirects), to: reference, push: true).get()
        if response.status == 404 { return false }
        try Self.expect(response, [200], url: url)
        return true
    }

    /// Uploads `size` bytes read by `read(offset, count)` as blob `digest`, in chunks
    /// (`POST`, `PATCH`…, `PUT ?digest=`). A chunk that fails is retried from where the registry
    /// says the upload stands (`GET` on the upload's location) after a backoff, so a broken
    /// connection or a busy registry costs at most one chunk. `progress` gets the bytes the
    /// registry has acknowledged.
    public func pushBlob(_ reference: OCIReference, digest: String, size: Int64,
                         read: @escaping @Sendable (Int64, Int) throws(RegistryError) -> [UInt8],
                         progress: @escaping @Sendable (Int64) -> Void = { _ in }) async throws(RegistryError) {
        let start = await base(reference) + "blobs/uploads/"
        let redirects = await redirectProtocols(reference)
        let opened = try await run(MemoryRequest(method: "POST", url: start, body: [], redirectProtocols: redirects), to: reference, push: true).get()
        try Self.expect(opened, [202], url: start)
        var location = try uploadLocation(opened, reference: reference, base: start)
        var offset: Int64 = 0
        var failures = 0
        while offset < size {
            let count = Int(min(Int64(uploadChunkBytes), size - offset))
            let chunk = try read(offset, count)
            guard chunk.count == count else { throw .io("the file to upload ended at \(offset + Int64(chunk.count)) of \(size) bytes") }
            let request = MemoryRequest(method: "PATCH", url: location,
                                          headers: ["Content-Type: application/octet-stream", "Content-Range: \(offset)-\(offset + Int64(count) - 1)"],
                                          body: chunk, redirectProtocols: redirects)
            let sent = await run(request, to: reference, push: true)
            if case .success(let response) = sent, response.status == 202 {
                location = try uploadLocation(response, reference: reference, base: start)
                offset += Int64(count)
                failures = 0
                progress(offset)
                continue
            }
            // Ask where the upload stands and go on from there.
            failures += 1
            guard failures < max(2, options.maxAttemptsPerMirror) else {
                switch sent {
                case .failure(let error): throw error
                case .success(let response): try Self.expect(response, [202], url: location); throw .status(url: location, response.status, "")
                }
            }
            try? await clock.sleep(for: options.backoff(afterAttempt: failures))
            let status = try await run(MemoryRequest(method: "GET", url: location, redirectProtocols: redirects), to: reference, push: true).get()
            try Self.expect(status, [204], url: location)
            location = try uploadLocation(status, reference: reference, base: start)
            offset = Self.uploadedBytes(status.header("range"))
        }
        let separator = location.contains("?") ? "&" : "?"
        let finish = location + separator + "digest=" + digest
        let closed = try await run(MemoryRequest(method: "PUT", url: finish, headers: ["Content-Type: application/octet-stream"], body: [],
                                                   redirectProtocols: redirects), to: reference, push: true).get()
        try Self.expect(closed, [201], url: location)
    }

    /// Uploads a small blob held in memory, unless the repository has it.
    func pushBlob(_ reference: OCIReference, bytes: [UInt8]) async throws(RegistryError) -> (digest: String, pushed: Bool) {
        let digest = CatalogArtifact.digest(of: bytes)
        if try await hasBlob(reference, digest: digest) { return (digest, false) }
        try await pushBlob(reference, digest: digest, size: Int64(bytes.count)) { offset, count in
            Array(bytes[Int(offset)..<Int(offset) + count])
        }
        return (digest, true)
    }

    /// Writes `manifest` under `reference`'s tag; returns its digest, checked against the registry's.
    public func pushManifest(_ reference: OCIReference, _ manifest: [UInt8]) async throws(RegistryError) -> String {
        let url = await base(reference) + "manifests/" + reference.selectorText
        let redirects = await redirectProtocols(reference)
        let response = try await run(MemoryRequest(method: "PUT", url: url, headers: ["Content-Type: " + CatalogArtifact.manifestMediaType], body: manifest,
                                                     redirectProtocols: redirects), to: reference, push: true).get()
        try Self.expect(response, [201], url: url)
        let digest = CatalogArtifact.digest(of: manifest)
        if let announced = response.header("docker-content-digest"), announced != digest {
            throw .mismatch("the registry stored the manifest as \(announced), it hashes to \(digest)")
        }
        return digest
    }

    /// A reader of `path` for ``pushBlob(_:digest:size:read:progress:)``.
    public static func fileReader(_ path: String) -> @Sendable (Int64, Int) throws(RegistryError) -> [UInt8] {
        { offset, count throws(RegistryError) in
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw .io("open(\(path)): \(String(cString: strerror(errno)))") }
            defer { close(fd) }
            var buffer = [UInt8](repeating: 0, count: count)
            var done = 0
            while done < count {
                let got = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, count - done, off_t(offset) + off_t(done)) }
                if got < 0, errno == EINTR { continue }
                guard got > 0 else { break }
                done += got
            }
            return Array(buffer.prefix(done))
        }
    }

    /// The upload's next URL from a `Location` header (relative ones resolved against the registry).
    private func uploadLocation(_ response: MemoryResponse, reference: OCIReference, base: String) throws(RegistryError) -> String {
        guard let location = response.header("location"), !location.isEmpty else {
            throw .status(url: "\(reference)", response.status, "an upload answer without a Location")
        }
        if location.hasPrefix("https://") { return location }
        if location.hasPrefix("http://") {
            // An upload begun over TLS must not continue in the clear.
            guard base.hasPrefix("http:") else { throw .plainHTTPRefused(host: Self.authority(of: location)) }
            return location
        }
        let origin = base.prefix { $0 != ":" } + "://" + reference.host
        return origin + (location.hasPrefix("/") ? "" : "/") + location
    }

    /// `Range: 0-N` → N + 1 bytes stored; none → 0.
    static func uploadedBytes(_ range: String?) -> Int64 {
        guard let range, let dash = range.firstIndex(of: "-"), let last = Int64(range[range.index(after: dash)...].trimmingCharacters(in: .whitespaces)) else { return 0 }
        return last + 1
    }
}
