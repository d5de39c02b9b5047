import EarshotWire
import Foundation

/// A catalog of downloadable model assets (`Docs/CATALOG.md`). Publishers raise `version` with
/// every release; a daemon never accepts a lower one than it has.
public struct Catalog: Codable, Sendable, Hashable {
    /// The only `format` this code understands.
    public static let supportedFormat = 1

    /// Format of the document; incompatible changes (new kinds or archive formats) raise it.
    public var format: Int
    /// Monotonic catalog version, at least 1.
    public var version: Int64
    /// When it was generated (free text, usually ISO 8601); informational.
    public var generated: String?
    /// The assets, possibly several versions of one id.
    public var assets: [CatalogAsset]

    enum CodingKeys: String, CodingKey {
        case format, version, generated, assets
    }

    public init(format: Int = Catalog.supportedFormat, version: Int64, generated: String? = nil, assets: [CatalogAsset]) {
        self.format = format
        self.version = version
        self.generated = generated
        self.assets = assets
    }

    /// Parses catalog JSON and validates it (``validate()``).
    public static func decode(from data: Data) throws(CatalogError) -> Catalog {
        let catalog = try parse(data)
        try catalog.validate()
        return catalog
    }

    /// Parses catalog JSON without validating it.
    static func parse(_ data: Data) throws(CatalogError) -> Catalog {
        do {
            return try JSONDecoder().decode(Catalog.self, from: data)
        } catch {
            throw .malformedJSON(CatalogError.describe(error))
        }
    }

    /// An encoder producing the canonical spelling: pretty-printed, sorted keys, unescaped slashes.
    public static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return encoder
    }

    /// Throws the first problem ``problems()`` finds.
    public func validate() throws(CatalogError) {
        if let first = problems().first { throw first }
    }

    /// Every rule the catalog breaks, in document order (empty when valid): the format is supported,
    /// the version is at least 1, every asset is valid (``CatalogAsset/problems()``), and no
    /// (id, version) appears twice.
    public func problems() -> [CatalogError] {
        var found: [CatalogError] = []
        if format != Catalog.supportedFormat { found.append(.unsupportedFormat(format)) }
        if version < 1 { found.append(.invalidVersion(version)) }
        var seen: Set<String> = []
        for (index, asset) in assets.enumerated() {
            for problem in asset.problems() {
                found.append(.invalidAsset(index: index, id: asset.id, version: asset.version, problem: problem))
            }
            if !seen.insert("\(asset.id)\u{0}\(asset.version)").inserted {
                found.append(.duplicateAsset(id: asset.id, version: asset.version))
            }
        }
        return found
    }

    /// Merges the assets of several sources, one entry per id: the highest version wins, and on a
    /// tie the earlier source's entry is kept. Ids appear in the order they are first seen.
    public static func merged(_ catalogs: [Catalog]) -> [CatalogAsset] {
        var order: [String] = []
        var chosen: [String: CatalogAsset] = [:]
        for catalog in catalogs {
            for asset in catalog.assets {
                if let current = chosen[asset.id] {
                    if asset.version > current.version { chosen[asset.id] = asset }
                } else {
                    chosen[asset.id] = asset
                    order.append(asset.id)
                }
            }
        }
        return order.compactMap { chosen[$0] }
    }
}

/// One downloadable asset: a model (or model part set) for one engine.
public struct CatalogAsset: Codable, Sendable, Hashable {
    /// Stable name: 1–128 characters of `a-z 0-9 . _ -`, starting with a letter or digit.
    public var id: String
    /// Monotonic per id, at least 1; installed side by side under `assets/<id>/<version>/`.
    public var version: Int
    /// Which module kind it serves.
    public var kind: AssetKind
    /// The engine that loads it, e.g. `sherpa-onnx-whisper`, `sherpa-onnx-transducer`,
    /// `sherpa-onnx-silero-vad`, `pocketsphinx`.
    public var engine: String
    /// BCP-47 locales it serves; empty only for language-independent detectors.
    public var locales: [String]
    /// What results it can produce.
    public var capabilities: AssetCapabilities
    /// Download size in bytes.
    public var size: Int64
    /// Upper bound on the extracted bytes (extraction stops beyond it).
    public var installedSize: Int64
    /// SHA-256 of the download, 64 lowercase hex digits.
    public var sha256: String
    /// Mirrors, tried in order (`http`, `https`, `file`).
    public var urls: [String]
    /// How the download is packed.
    public var format: ArchiveFormat
    /// Role (`encoder`, `decoder`, `tokens`, `model`, `dictionary`, …) → path relative to the
    /// installed directory.
    public var files: [String: String]
    /// License of the model (SPDX identifier or short text).
    public var license: String
    /// Human-readable description.
    public var description: String?
    /// Preference among assets that serve the same locale and kind equally well: higher wins
    /// (optional, default 0).
    public var rank: Int
    /// Presets (e.g. `progressiveTranscription`) for which this asset is preferred over a
    /// higher-ranked one that serves the same locale (optional).
    public var preferredPresets: [String]

    enum CodingKeys: String, CodingKey {
        case id, version, kind, engine, locales, capabilities, size
        case installedSize = "installed_size"
        case sha256, urls, format, files, license, description, rank
        case preferredPresets = "preferred_presets"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(String.self, forKey: .id)
        version = try c.decode(Int.self, forKey: .version)
        kind = try c.decode(AssetKind.self, forKey: .kind)
        engine = try c.decode(String.self, forKey: .engine)
        locales = try c.decode([String].self, forKey: .locales)
        capabilities = try c.decode(AssetCapabilities.self, forKey: .capabilities)
        size = try c.decode(Int64.self, forKey: .size)
        installedSize = try c.decode(Int64.self, forKey: .installedSize)
        sha256 = try c.decode(String.self, forKey: .sha256)
        urls = try c.decode([String].self, forKey: .urls)
        format = try c.decode(ArchiveFormat.self, forKey: .format)
        files = try c.decode([String: String].self, forKey: .files)
        license = try c.decode(String.self, forKey: .license)
        description = try c.decodeIfPresent(String.self, forKey: .description)
        rank = try c.decodeIfPresent(Int.self, forKey: .rank) ?? 0
        preferredPresets = try c.decodeIfPresent([String].self, forKey: .preferredPresets) ?? []
    }

    public init(id: String, version: Int, kind: AssetKind, engine: String, locales: [String], capabilities: AssetCapabilities = AssetCapabilities(), size: Int64, installedSize: Int64, sha256: String, urls: [String], format: ArchiveFormat, files: [String: String], license: String, description: String? = nil, rank: Int = 0, preferredPresets: [String] = []) {
        self.id = id
        self.version = version
        self.kind = kind
        self.engine = engine
        self.locales = locales
        self.capabilities = capabilities
        self.size = size
        self.installedSize = installedSize
        self.sha256 = sha256
        self.urls = urls
        self.format = format
        self.files = files
        self.license = license
        self.description = description
        self.rank = rank
        self.preferredPresets = preferredPresets
    }

    /// URL schemes a mirror may use.
    public static let allowedURLSchemes: Set<String> = ["http", "https", "file"]

    /// Every rule the asset breaks (empty when valid). Roles are checked in sorted order.
    public func problems() -> [CatalogAssetProblem] {
        var found: [CatalogAssetProblem] = []
        if !CatalogAsset.isValidID(id) { found.append(.invalidID) }
        if version < 1 { found.append(.invalidVersion) }
        if engine.trimmingCharacters(in: .whitespaces).isEmpty { found.append(.emptyEngine) }
        if locales.isEmpty, kind != .detector { found.append(.noLocales) }
        for locale in locales where LocaleTag(locale) == nil { found.append(.invalidLocale(locale)) }
        if size < 1 { found.append(.invalidSize) }
        if installedSize < 1 {
            found.append(.invalidInstalledSize)
        } else if format == .file, installedSize < size {
            found.append(.installedSizeBelowSize)
        }
        if !CatalogAsset.isValidDigest(sha256) { found.append(.invalidSHA256(sha256)) }
        if urls.isEmpty { found.append(.noURLs) }
        for url in urls {
            if let reason = CatalogAsset.urlProblem(url) { found.append(.invalidURL(url, reason: reason)) }
        }
        if files.isEmpty { found.append(.noFiles) }
        for role in files.keys.sorted() {
            if !CatalogAsset.isValidRole(role) { found.append(.invalidFileRole(role)) }
            if let path = files[role], !CatalogAsset.isValidRelativePath(path) {
                found.append(.invalidFilePath(role: role, path: path))
            }
        }
        if format == .file, files.count != 1 { found.append(.singleFileNeedsOneRole(count: files.count)) }
        if license.trimmingCharacters(in: .whitespaces).isEmpty { found.append(.emptyLicense) }
        return found
    }

    static func isValidID(_ id: String) -> Bool {
        let bytes = Array(id.utf8)
        guard (1...128).contains(bytes.count), let first = bytes.first, isLowerAlphanumeric(first) else { return false }
        return bytes.allSatisfy { isLowerAlphanumeric($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") }
    }

    static func isValidDigest(_ digest: String) -> Bool {
        let bytes = Array(digest.utf8)
        return bytes.count == 64 && bytes.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }
    }

    static func isValidRole(_ role: String) -> Bool {
        let bytes = Array(role.utf8)
        return (1...64).contains(bytes.count) && bytes.allSatisfy { isLowerAlphanumeric($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") }
    }

    /// A path inside the installed directory: not absolute, no empty, `.` or `..` components, no NUL.
    static func isValidRelativePath(_ path: String) -> Bool {
        guard !path.isEmpty, !path.hasPrefix("/"), !path.utf8.contains(0) else { return false }
        return path.split(separator: "/", omittingEmptySubsequences: false).allSatisfy { !$0.isEmpty && $0 != "." && $0 != ".." }
    }

    /// Why `text` is not a usable mirror URL, or nil when it is.
    static func urlProblem(_ text: String) -> String? {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased() else {
            return "not an absolute URL"
        }
        guard allowedURLSchemes.contains(scheme) else { return "scheme \"\(scheme)\" is not http, https or file" }
        let host = components.host ?? ""
        if scheme == "file" {
            guard host.isEmpty || host == "localhost" else { return "a file URL must not name a host" }
            guard components.path.hasPrefix("/") else { return "a file URL needs an absolute path" }
        } else {
            guard !host.isEmpty else { return "no host" }
        }
        return nil
    }

    private static func isLowerAlphanumeric(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }
}

/// What an asset's engine can report, matched against a module's options during resolution.
public struct AssetCapabilities: Codable, Sendable, Hashable {
    /// Results arrive while audio streams in (progressive presets).
    public var streaming: Bool
    /// Produces volatile (replaceable) results before final ones.
    public var volatileResults: Bool
    /// Reports time ranges for text runs.
    public var timeRanges: Bool
    /// Reports alternative transcriptions.
    public var alternatives: Bool
    /// Reports confidence values.
    public var confidence: Bool
    /// Content hints it is suited to (e.g. `shortForm`, `farField`, `customizedLanguage`).
    public var contentHints: [String]
    /// Translates speech into English (the `translate` transcription option); optional, default false.
    public var translation: Bool

    enum CodingKeys: String, CodingKey {
        case streaming
        case volatileResults = "volatile_results"
        case timeRanges = "time_ranges"
        case alternatives, confidence
        case contentHints = "content_hints"
        case translation
    }

    public init(streaming: Bool = false, volatileResults: Bool = false, timeRanges: Bool = false, alternatives: Bool = false, confidence: Bool = false, contentHints: [String] = [], translation: Bool = false) {
        self.streaming = streaming
        self.volatileResults = volatileResults
        self.timeRanges = timeRanges
        self.alternatives = alternatives
        self.confidence = confidence
        self.contentHints = contentHints
        self.translation = translation
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        streaming = try c.decode(Bool.self, forKey: .streaming)
        volatileResults = try c.decode(Bool.self, forKey: .volatileResults)
        timeRanges = try c.decode(Bool.self, forKey: .timeRanges)
        alternatives = try c.decode(Bool.self, forKey: .alternatives)
        confidence = try c.decode(Bool.self, forKey: .confidence)
        contentHints = try c.decode([String].self, forKey: .contentHints)
        translation = try c.decodeIfPresent(Bool.self, forKey: .translation) ?? false
    }
}

/// One rule a catalog asset breaks.
public enum CatalogAssetProblem: Sendable, Hashable, CustomStringConvertible {
    case invalidID
    case invalidVersion
    case emptyEngine
    case noLocales
    case invalidLocale(String)
    case invalidSize
    case invalidInstalledSize
    case installedSizeBelowSize
    case invalidSHA256(String)
    case noURLs
    case invalidURL(String, reason: String)
    case noFiles
    case invalidFileRole(String)
    case invalidFilePath(role: String, path: String)
    case singleFileNeedsOneRole(count: Int)
    case emptyLicense

    public var description: String {
        switch self {
        case .invalidID: "id must be 1–128 characters of a-z 0-9 . _ - starting with a letter or digit"
        case .invalidVersion: "version must be at least 1"
        case .emptyEngine: "engine is empty"
        case .noLocales: "only detectors may have no locales"
        case .invalidLocale(let locale): "locale \"\(locale)\" is not a BCP-47 language tag"
        case .invalidSize: "size must be at least 1 byte"
        case .invalidInstalledSize: "installed_size must be at least 1 byte"
        case .installedSizeBelowSize: "installed_size is smaller than size for a single-file asset"
        case .invalidSHA256(let digest): "sha256 \"\(digest)\" is not 64 lowercase hex digits"
        case .noURLs: "no download URLs"
        case .invalidURL(let url, let reason): "URL \"\(url)\": \(reason)"
        case .noFiles: "no files by role"
        case .invalidFileRole(let role): "file role \"\(role)\" must be 1–64 characters of a-z 0-9 _ -"
        case .invalidFilePath(let role, let path): "file \"\(role)\" path \"\(path)\" must be relative, without empty, . or .. components"
        case .singleFileNeedsOneRole(let count): "format \"file\" needs exactly one file role, found \(count)"
        case .emptyLicense: "license is empty"
        }
    }
}

/// Why a catalog was refused; the current catalog stays in use.
public enum CatalogError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The minisign signature did not verify.
    case signature(SignatureError)
    /// Not JSON, or not the catalog's shape (the text says where).
    case malformedJSON(String)
    /// A `format` this code does not understand.
    case unsupportedFormat(Int)
    /// The catalog `version` is below 1.
    case invalidVersion(Int64)
    /// The asset at `index` in `assets` breaks a rule.
    case invalidAsset(index: Int, id: String, version: Int, problem: CatalogAssetProblem)
    /// The same (id, version) appears twice.
    case duplicateAsset(id: String, version: Int)
    /// The offered catalog is older than the one in use.
    case rollback(current: Int64, offered: Int64)

    public var description: String {
        switch self {
        case .signature(let error): "catalog signature: \(error)"
        case .malformedJSON(let detail): "catalog is not valid catalog JSON: \(detail)"
        case .unsupportedFormat(let format): "catalog format \(format) is not supported (this version reads format \(Catalog.supportedFormat))"
        case .invalidVersion(let version): "catalog version \(version) must be at least 1"
        case .invalidAsset(let index, let id, let version, let problem): "catalog assets[\(index)] (\"\(id)\" version \(version)): \(problem)"
        case .duplicateAsset(let id, let version): "catalog lists asset \"\(id)\" version \(version) more than once"
        case .rollback(let current, let offered): "catalog version \(offered) is older than the current version \(current) (a rollback)"
        }
    }

    /// A one-line account of a decoding failure with its JSON path (e.g. `assets[2].kind`).
    static func describe(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "\(error)" }
        func path(_ codingPath: [any CodingKey]) -> String {
            var text = ""
            for key in codingPath {
                if let index = key.intValue { text += "[\(index)]" } else { text += (text.isEmpty ? "" : ".") + key.stringValue }
            }
            return text.isEmpty ? "top level" : text
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "\(path(context.codingPath + [key])): missing"
        case .valueNotFound(_, let context):
            return "\(path(context.codingPath)): missing value"
        case .typeMismatch(let type, let context):
            return "\(path(context.codingPath)): expected \(type)"
        case .dataCorrupted(let context):
            return "\(path(context.codingPath)): \(context.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }
}
