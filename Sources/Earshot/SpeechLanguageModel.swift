import EarshotLanguageModel
import EarshotSystem
import EarshotWire
import Foundation

/// Preparing custom language models (Apple's `SFSpeechLanguageModel`): the daemon reads the data
/// `SFCustomLanguageModelData.export(to:)` wrote, checks and compiles it, and keeps it for this
/// app (Docs/CUSTOM_LANGUAGE_MODELS.md). What the app keeps is a small handle file at
/// `Configuration.languageModel` naming the prepared model; a `DictationTranscriber` with
/// `.customizedLanguage(modelConfiguration:)` sends that name when its session opens.
public final class SFSpeechLanguageModel: Sendable {
    /// Where a prepared model's handle goes (and, optionally, its vocabulary), and how much of the
    /// language-model probability it gets.
    public struct Configuration: Hashable, Sendable {
        /// The handle file ``SFSpeechLanguageModel/prepareCustomLanguageModel(for:configuration:)`` writes.
        public let languageModel: URL
        /// If set, preparation writes the model's words here, one per line.
        public let vocabulary: URL?
        /// Share of the language-model probability in (0, 1); nil: the engine's default (0.5).
        public let weight: Double?

        public init(languageModel: URL, vocabulary: URL? = nil, weight: Double? = nil) {
            self.languageModel = languageModel
            self.vocabulary = vocabulary
            self.weight = weight
        }
    }

    /// The handle file: which prepared model a configuration names.
    struct Handle: Codable {
        static let formatName = "earshot-prepared-language-model"
        var format = formatName
        var formatVersion = 1
        var model: String
        var identifier: String
        var version: String
        var locale: String
    }

    /// Has the daemon prepare the exported data at `asset` for this app and writes the handle to
    /// `configuration.languageModel` (and the vocabulary, if asked). Preparing the same data
    /// again reuses the prepared model.
    public static func prepareCustomLanguageModel(for asset: URL, configuration: Configuration) async throws {
        try await prepare(asset, configuration: configuration, ignoresCache: false, clientIdentifier: nil)
    }

    /// As ``prepareCustomLanguageModel(for:configuration:)``; with `ignoresCache`, the daemon
    /// prepares the data anew even when it is prepared.
    public static func prepareCustomLanguageModel(for asset: URL, configuration: Configuration, ignoresCache: Bool) async throws {
        try await prepare(asset, configuration: configuration, ignoresCache: ignoresCache, clientIdentifier: nil)
    }

    /// Apple's deprecated form: `clientIdentifier` is kept with the prepared model and listed.
    @available(*, deprecated, renamed: "prepareCustomLanguageModel(for:configuration:)")
    public static func prepareCustomLanguageModel(for asset: URL, clientIdentifier: String, configuration: Configuration) async throws {
        try await prepare(asset, configuration: configuration, ignoresCache: false, clientIdentifier: clientIdentifier)
    }

    @available(*, deprecated, renamed: "prepareCustomLanguageModel(for:configuration:ignoresCache:)")
    public static func prepareCustomLanguageModel(for asset: URL, clientIdentifier: String, configuration: Configuration, ignoresCache: Bool) async throws {
        try await prepare(asset, configuration: configuration, ignoresCache: ignoresCache, clientIdentifier: clientIdentifier)
    }

    /// The completion-handler form (Apple's Objective-C shape); `completion` gets nil or the error.
    public static func prepareCustomLanguageModel(for asset: URL, configuration: Configuration, completion: @escaping @Sendable ((any Error)?) -> Void) {
        complete(completion) { try await prepare(asset, configuration: configuration, ignoresCache: false, clientIdentifier: nil) }
    }

    public static func prepareCustomLanguageModel(for asset: URL, configuration: Configuration, ignoresCache: Bool,
                                                  completion: @escaping @Sendable ((any Error)?) -> Void) {
        complete(completion) { try await prepare(asset, configuration: configuration, ignoresCache: ignoresCache, clientIdentifier: nil) }
    }

    @available(*, deprecated, renamed: "prepareCustomLanguageModel(for:configuration:completion:)")
    public static func prepareCustomLanguageModel(for asset: URL, clientIdentifier: String, configuration: Configuration,
                                                  completion: @escaping @Sendable ((any Error)?) -> Void) {
        complete(completion) { try await prepare(asset, configuration: configuration, ignoresCache: false, clientIdentifier: clientIdentifier) }
    }

    @available(*, deprecated, renamed: "prepareCustomLanguageModel(for:configuration:ignoresCache:completion:)")
    public static func prepareCustomLanguageModel(for asset: URL, clientIdentifier: String, configuration: Configuration, ignoresCache: Bool,
                                                  completion: @escaping @Sendable ((any Error)?) -> Void) {
        complete(completion) { try await prepare(asset, configuration: configuration, ignoresCache: ignoresCache, clientIdentifier: clientIdentifier) }
    }

    private static func complete(_ completion: @escaping @Sendable ((any Error)?) -> Void, _ work: @escaping @Sendable () async throws -> Void) {
        Task {
            do {
                try await work()
                completion(nil)
            } catch {
                completion(error)
            }
        }
    }

    private static func prepare(_ asset: URL, configuration: Configuration, ignoresCache: Bool, clientIdentifier: String?) async throws {
        let limit = CustomLanguageModelLimits.standard.maxFileBytes
        let bytes: [UInt8] = try await BlockingWork.run("earshot.language-model") {
            let handle = try FileHandle(forReadingFrom: asset)
            defer { try? handle.close() }
            let data = try handle.read(upToCount: limit + 1) ?? Data()
            guard data.count <= limit else {
                throw EarshotError.invalidLanguageModelData(CustomLanguageModelError.limitExceeded("file size", limit: limit).description)
            }
            return Array(data)
        }
        let reply = try await EarshotService.shared.request(PrepareLanguageModelRequest(ignoresCache: ignoresCache, clientIdentifier: clientIdentifier),
                                                            payload: bytes, expecting: PrepareLanguageModelReply.self)
        let prepared = reply.prepared
        let handle = Handle(model: prepared.model, identifier: prepared.identifier, version: prepared.version, locale: prepared.locale)
        try await BlockingWork.run("earshot.language-model") {
            try JSONEncoder().encode(handle).write(to: configuration.languageModel, options: .atomic)
            if let vocabulary = configuration.vocabulary {
                let words = try LanguageModelCompiler.compile(try CustomLanguageModelDocument.read(Data(bytes))).words
                try Data((words.joined(separator: "\n") + "\n").utf8).write(to: vocabulary, options: .atomic)
            }
        }
    }

    /// The prepared model `configuration`'s handle names, as a dictation module sends it; a
    /// missing or foreign handle file means the model was never prepared.
    static func use(_ configuration: Configuration) async throws -> LanguageModelUse {
        let handle = try await BlockingWork.run("earshot.language-model") { () throws -> Handle in
            guard let data = try? Data(contentsOf: configuration.languageModel),
                  let handle = try? JSONDecoder().decode(Handle.self, from: data), handle.format == Handle.formatName else {
                throw EarshotError.invalidLanguageModelData(
                    "\(configuration.languageModel.path) is not a prepared custom language model: prepare it with SFSpeechLanguageModel.prepareCustomLanguageModel(for:configuration:) first")
            }
            return handle
        }
        return LanguageModelUse(model: handle.model, weight: configuration.weight)
    }
}
