import EarshotLanguageModel
import EarshotSystem
import EarshotWire
import Foundation

/// Prepared custom language models (Apple's `prepareCustomLanguageModel`): an app's exported data,
/// checked and compiled once, kept per uid under the state directory
/// (`language-models/<uid>/<model>.json`, 0600, in a 0700 directory), at most `maximumPerApp` per
/// app and `maximumBytesPerUser` for all of a uid's apps together (so inventing app ids cannot fill
/// the disk). A model is named by the SHA-256 of its app and its data (`model`), so preparing the same
/// data again reuses it; sessions of the same uid name it to use it, and another uid cannot.
public actor LanguageModelStore {
    /// What the store keeps of one prepared model.
    struct Entry: Codable {
        var info: PreparedLanguageModelInfo
        var document: CustomLanguageModelDocument
    }

    private let directory: String
    public nonisolated let maximumPerApp: Int
    /// Most bytes of prepared models one uid keeps, all its apps together.
    public nonisolated let maximumBytesPerUser: Int
    private let limits: CustomLanguageModelLimits

    public init(directory: String, maximumPerApp: Int = 8, maximumBytesPerUser: Int = 32 << 20, limits: CustomLanguageModelLimits = .standard) {
        self.directory = directory
        self.maximumPerApp = maximumPerApp
        self.maximumBytesPerUser = maximumBytesPerUser
        self.limits = limits
    }

    /// Prepares the exported data `bytes` for `client`: read strictly, compiled (so a model that
    /// is prepared is one sessions can use), and stored, unless the same data is already prepared
    /// for the app and `ignoresCache` is false. Refused past the app's quota.
    public func prepare(_ bytes: [UInt8], for client: ClientIdentity, ignoresCache: Bool, clientIdentifier: String? = nil,
                        now: Date = Date()) async throws -> (PreparedLanguageModelInfo, reused: Bool) {
        let (directory, limits, maximum, maximumBytes) = (directory, limits, maximumPerApp, maximumBytesPerUser)
        if let clientIdentifier, clientIdentifier.isEmpty || clientIdentifier.count > limits.maxIdentifierLength
            || clientIdentifier.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            throw AssetError.invalidLanguageModel("a client identifier is 1 to \(limits.maxIdentifierLength) characters with no control characters")
        }
        return try await BlockingWork.run("earshot.language-model") {
            let document: CustomLanguageModelDocument
            let compiled: CompiledLanguageModel
            do {
                document = try CustomLanguageModelDocument.read(Data(bytes), limits: limits)
                compiled = try LanguageModelCompiler.compile(document, limits: limits)
            } catch let error as CustomLanguageModelError {
                throw AssetError.invalidLanguageModel(error.description)
            }
            let canonical = try document.encoded(limits: limits)
            let model = try FileDigest.sha256(bytes: Array(client.appID.utf8) + [0] + Array(canonical))
            let folder = try Self.folder(directory, uid: client.uid)
            let path = "\(folder)/\(model).json"
            if !ignoresCache, let entry = try? Self.entry(at: path), entry.info.appId == client.appID, entry.info.clientIdentifier == clientIdentifier {
                return (entry.info, true)
            }
            let others = try Self.entries(in: folder).filter { $0.info.appId == client.appID && $0.info.model != model }
            guard others.count < maximum else {
                throw AssetError.languageModelQuotaExceeded(client: client, maximum: maximum)
            }
            let phrases = document.phrases.count + document.templateGroups.reduce(0) { total, group in
                total + group.templates.reduce(0) { $0 + ((try? TemplateExpansion($1.body).expansions(classes: group.classes, limit: limits.maxExpandedPhrases)) ?? 0) }
            }
            let info = PreparedLanguageModelInfo(model: model, identifier: document.identifier, version: document.version, locale: document.locale,
                                                 uid: client.uid, appId: client.appID, clientIdentifier: clientIdentifier, phrases: phrases, words: compiled.words.count,
                                                 prepared: now.timeIntervalSince1970)
            let entry = try JSONEncoder().encode(Entry(info: info, document: document))
            let used = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".json") && $0 != "\(model).json" }
                .reduce(0) { $0 + (((try? FileManager.default.attributesOfItem(atPath: "\(folder)/\($1)"))?[.size] as? Int) ?? 0) }
            guard used + entry.count <= maximumBytes else {
                throw AssetError.userQuotaExceeded("uid \(client.uid)'s prepared custom language models would take \(used + entry.count) bytes, over the \(maximumBytes) one user may keep (garbage collection removes those no reservation keeps)")
            }
            try Self.write(entry, to: path)
            return (info, false)
        }
    }

    /// The data of `model` prepared by one of `uid`'s apps; `notFound` for any other uid's.
    public func document(_ model: String, uid: UInt32) async throws -> CustomLanguageModelDocument {
        let directory = directory
        return try await BlockingWork.run("earshot.language-model") {
            guard model.count == 64, model.allSatisfy(\.isHexDigit),
                  let entry = try? Self.entry(at: "\(try Self.folder(directory, uid: uid))/\(model).json") else {
                throw AssetError.notFound("prepared custom language model \(model) of uid \(uid)")
            }
            return entry.document
        }
    }

    /// The prepared models of `uid` (nil: every uid's), oldest first.
    public func list(uid: UInt32?) async throws -> [PreparedLanguageModelInfo] {
        let directory = directory
        return try await BlockingWork.run("earshot.language-model") {
            let uids = uid.map { [$0] } ?? ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).compactMap(UInt32.init)
            return try uids.flatMap { try Self.entries(in: Self.folder(directory, uid: $0)) }.map(\.info)
                .sorted { ($0.prepared, $0.model) < ($1.prepared, $1.model) }
        }
    }

    /// Removes the models no reservation keeps: those whose app holds no reservation in `live` of
    /// a locale of the model's language, prepared before `preparedBefore` (the GC grace period).
    /// Returns them as `language-models/<uid>/<model>` (with `dryRun`, removes nothing).
    func collect(keeping live: [ReservationInfo], preparedBefore cutoff: Double, dryRun: Bool) async throws -> [GCRemovalInfo] {
        let directory = directory
        let kept = Set(live.map { "\($0.uid)/\($0.appId)/\(Self.language($0.locale))" })
        return try await BlockingWork.run("earshot.language-model") {
            var removed: [GCRemovalInfo] = []
            for uid in ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).compactMap(UInt32.init) {
                let folder = try Self.folder(directory, uid: uid)
                for entry in try Self.entries(in: folder) where entry.info.prepared < cutoff {
                    let info = entry.info
                    guard !kept.contains("\(info.uid)/\(info.appId)/\(Self.language(info.locale))") else { continue }
                    let path = "\(folder)/\(info.model).json"
                    let bytes = ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int).map(Int64.init) ?? 0
                    if !dryRun { try FileManager.default.removeItem(atPath: path) }
                    removed.append(GCRemovalInfo(asset: "language-models/\(uid)/\(info.model)", bytes: bytes, reason: "unreserved"))
                }
            }
            return removed
        }
    }

    /// Bytes the prepared models of every uid take.
    func totalBytes() async throws -> Int64 {
        let directory = directory
        return try await BlockingWork.run("earshot.language-model") {
            var total: Int64 = 0
            for uid in ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).compactMap(UInt32.init) {
                let folder = try Self.folder(directory, uid: uid)
                for name in try FileManager.default.contentsOfDirectory(atPath: folder) where name.hasSuffix(".json") {
                    total += ((try? FileManager.default.attributesOfItem(atPath: "\(folder)/\(name)"))?[.size] as? Int).map(Int64.init) ?? 0
                }
            }
            return total
        }
    }

    private static func language(_ locale: String) -> String {
        Locale.Components(identifier: locale).languageComponents.languageCode?.identifier ?? locale
    }

    // MARK: Files (blocking)

    /// `uid`'s directory, made (0700) if missing.
    private static func folder(_ directory: String, uid: UInt32) throws -> String {
        let path = "\(directory)/\(uid)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return path
    }

    private static func entry(at path: String) throws -> Entry {
        try JSONDecoder().decode(Entry.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
    }

    private static func entries(in folder: String) throws -> [Entry] {
        try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".json") }.compactMap { try? entry(at: "\(folder)/\($0)") }
    }

    /// Writes `data` to `path` through a temporary file and a rename (0600).
    private static func write(_ data: Data, to path: String) throws {
        let temporary = path + ".tmp"
        guard FileManager.default.createFile(atPath: temporary, contents: data, attributes: [.posixPermissions: 0o600]) else {
            throw AssetError.internalError("cannot write \(temporary): \(String(cString: strerror(errno)))")
        }
        guard rename(temporary, path) == 0 else {
            let error = errno
            unlink(temporary)
            throw AssetError.internalError("cannot rename \(temporary): \(String(cString: strerror(error)))")
        }
    }
}
