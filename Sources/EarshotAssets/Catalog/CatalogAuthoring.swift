import EarshotSystem
import EarshotWire
import Foundation

/// Writing catalog entries for publishers (`earshotctl catalog add-asset`): download an asset,
/// hash and inspect it the way an install will, and merge the entry into an unsigned catalog.
/// Hashing and extraction run on dedicated threads.
public enum CatalogAuthoring {
    /// What a publisher says about an asset; the rest is measured.
    public struct Description: Sendable {
        public var url: String
        public var id: String
        public var version: Int
        public var kind: AssetKind
        public var engine: String
        public var locales: [String]
        /// Role → path inside the asset; empty for a single file (role `model`).
        public var roles: [String: String]
        public var license: String
        /// How the download is packed; nil: inferred from the URL.
        public var format: ArchiveFormat?

        public init(url: String, id: String, version: Int, kind: AssetKind, engine: String, locales: [String], roles: [String: String],
                    license: String, format: ArchiveFormat?) {
            self.url = url
            self.id = id
            self.version = version
            self.kind = kind
            self.engine = engine
            self.locales = locales
            self.roles = roles
            self.license = license
            self.format = format
        }
    }

    /// Why an entry could not be made.
    public struct Problem: Error, Sendable, CustomStringConvertible {
        public var description: String
        public init(description: String) { self.description = description }
    }

    /// Downloads `asset`, hashes it, extracts it as an install would (so `installed_size` is what
    /// extraction charges) and checks the roles name files that exist; the valid entry.
    public static func entry(for asset: Description, progress: @escaping @Sendable (DownloadProgress) -> Void) async throws -> CatalogAsset {
        let format = asset.format ?? inferFormat(asset.url)
        let work = NSTemporaryDirectory() + "earshot-authoring-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }
        let download = work + "/download"
        let result = try await Downloader().download(DownloadRequest(urls: [asset.url], destination: download), progress: progress)
        let fileName = (URL(string: asset.url)?.lastPathComponent).flatMap { $0.isEmpty ? nil : $0 } ?? "model"
        let staging = work + "/staging"
        let (sha256, extracted) = try await BlockingWork.run("earshot.authoring") {
            (try FileDigest.sha256(path: download),
             try ArchiveExtractor.extract(archive: download, format: format, into: staging, maxBytes: 1 << 40, singleFileName: format == .file ? fileName : nil))
        }
        var files = asset.roles
        let present = listing(staging)
        for (role, path) in files.sorted(by: { $0.key < $1.key }) where !present.contains(path) {
            throw Problem(description: "the asset has no \(path) for role \(role) (files: \(present.joined(separator: ", ")))")
        }
        if files.isEmpty, format == .file { files["model"] = fileName }
        guard !files.isEmpty else { throw Problem(description: "name the files by role with --role ROLE=PATH (files: \(present.joined(separator: ", ")))") }
        let entry = CatalogAsset(id: asset.id, version: asset.version, kind: asset.kind, engine: asset.engine, locales: asset.locales,
                                 size: result.bytes, installedSize: max(extracted.chargedBytes, 1), sha256: sha256, urls: [asset.url],
                                 format: format, files: files, license: asset.license)
        if let problem = entry.problems().first { throw Problem(description: "the entry is not valid: \(problem)") }
        return entry
    }

    /// The archive format a URL's name says.
    public static func inferFormat(_ url: String) -> ArchiveFormat {
        let lower = url.lowercased()
        if lower.hasSuffix(".tar.gz") || lower.hasSuffix(".tgz") { return .tarGz }
        if lower.hasSuffix(".tar.bz2") || lower.hasSuffix(".tbz2") { return .tarBz2 }
        if lower.hasSuffix(".tar.zst") || lower.hasSuffix(".tzst") { return .tarZst }
        if lower.hasSuffix(".zip") { return .zip }
        return .file
    }

    /// `catalog` (or a new one when nil) with `entry` added or replacing the same id and version,
    /// at a higher catalog version; validated.
    public static func merge(_ entry: CatalogAsset, into catalog: Catalog?, now: Date = Date()) throws -> Catalog {
        var merged = catalog ?? Catalog(version: 0, assets: [])
        merged.assets.removeAll { $0.id == entry.id && $0.version == entry.version }
        merged.assets.append(entry)
        merged.version = max(merged.version + 1, Int64(now.timeIntervalSince1970))
        merged.generated = now.formatted(.iso8601)
        try merged.validate()
        return merged
    }

    private static func listing(_ root: String) -> [String] {
        (FileManager.default.enumerator(atPath: root)?.allObjects as? [String] ?? []).sorted()
    }
}
