import EarshotAssets
import EarshotCommandLine
import EarshotWire
import Foundation

/// `earshotctl catalog add-asset URL …`: download, hash and inspect an asset, then print its catalog
/// entry or merge it into an unsigned catalog for an admin to sign. Talks to no daemon.
enum AddAssetCommand {
    static func run(_ arguments: Arguments) async -> ExitCode {
        do {
            let entry = try await makeEntry(arguments)
            let encoder = Catalog.makeEncoder()
            if let path = arguments.value("catalog") {
                let catalog = try merge(entry, into: path)
                try Data(encoder.encode(catalog)).write(to: URL(fileURLWithPath: path), options: .atomic)
                Output.note("wrote \(path) (catalog version \(catalog.version)); sign it with: minisign -Sm \(path)")
            } else {
                print(String(decoding: try encoder.encode(entry), as: UTF8.self))
            }
            return .success
        } catch {
            Output.error("earshotctl", "\(error)")
            return .failure
        }
    }

    struct Problem: Error, CustomStringConvertible {
        var description: String
    }

    static func makeEntry(_ arguments: Arguments) async throws -> CatalogAsset {
        guard arguments.positional.count == 3 else { throw Problem(description: "catalog add-asset needs a URL") }
        let url = arguments.positional[2]
        guard let id = arguments.value("id") else { throw Problem(description: "--id is required") }
        guard let kind = arguments.value("kind").flatMap(AssetKind.init) else { throw Problem(description: "--kind transcriber|dictation|detector is required") }
        guard let engine = arguments.value("engine") else { throw Problem(description: "--engine is required (e.g. sherpa-onnx-whisper, pocketsphinx)") }
        let format = try arguments.value("format").map { try ArchiveFormat(rawValue: $0).orThrow(Problem(description: "unknown --format \($0)")) } ?? inferFormat(url)

        let work = NSTemporaryDirectory() + "earshotctl-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }
        let download = work + "/download"
        let display = ProgressDisplay()
        let result = try await Downloader().download(DownloadRequest(urls: [url], destination: download)) { progress in
            display.show(InstallProgress(id: nil, asset: id, version: 0, phase: .downloading, bytesDone: progress.bytesDone, bytesTotal: progress.bytesTotal ?? 0))
        }
        display.finish()
        let sha256 = try FileDigest.sha256(path: download)

        let staging = work + "/staging"
        let fileName = (URL(string: url)?.lastPathComponent).flatMap { $0.isEmpty ? nil : $0 } ?? "model"
        let extracted = try ArchiveExtractor.extract(archive: download, format: format, into: staging, maxBytes: 1 << 40, singleFileName: format == .file ? fileName : nil)
        var files: [String: String] = [:]
        for role in arguments.values("role") {
            let parts = role.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw Problem(description: "--role needs ROLE=PATH, got \(role)") }
            guard FileManager.default.fileExists(atPath: staging + "/" + parts[1]) else {
                throw Problem(description: "the asset has no \(parts[1]) (files: \(listing(staging).joined(separator: ", ")))")
            }
            files[parts[0]] = parts[1]
        }
        if files.isEmpty, format == .file { files["model"] = fileName }
        guard !files.isEmpty else { throw Problem(description: "name the files by role with --role ROLE=PATH (files: \(listing(staging).joined(separator: ", ")))") }

        let entry = CatalogAsset(id: id, version: Int(arguments.value("version") ?? "1") ?? 1, kind: kind, engine: engine,
                                 locales: arguments.values("locale"), size: result.bytes, installedSize: max(extracted.chargedBytes, 1),
                                 sha256: sha256, urls: [url], format: format, files: files, license: arguments.value("license") ?? "unknown")
        if let problem = entry.problems().first { throw Problem(description: "the entry is not valid: \(problem)") }
        return entry
    }

    static func inferFormat(_ url: String) -> ArchiveFormat {
        let lower = url.lowercased()
        if lower.hasSuffix(".tar.gz") || lower.hasSuffix(".tgz") { return .tarGz }
        if lower.hasSuffix(".tar.bz2") || lower.hasSuffix(".tbz2") { return .tarBz2 }
        if lower.hasSuffix(".tar.zst") || lower.hasSuffix(".tzst") { return .tarZst }
        if lower.hasSuffix(".zip") { return .zip }
        return .file
    }

    static func listing(_ root: String) -> [String] {
        (FileManager.default.enumerator(atPath: root)?.allObjects as? [String] ?? []).sorted()
    }

    /// The unsigned catalog at `path` (or a new one) with `entry` added or replaced, at a higher version.
    static func merge(_ entry: CatalogAsset, into path: String) throws -> Catalog {
        var catalog = Catalog(version: 0, assets: [])
        if let data = FileManager.default.contents(atPath: path) {
            catalog = try Catalog.decode(from: data)
        }
        catalog.assets.removeAll { $0.id == entry.id && $0.version == entry.version }
        catalog.assets.append(entry)
        catalog.version = max(catalog.version + 1, Int64(Date().timeIntervalSince1970))
        catalog.generated = Date().formatted(.iso8601)
        try catalog.validate()
        return catalog
    }
}
