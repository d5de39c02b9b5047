/// Custom language model events (`earshot.language-model.*`). See Docs/PROTOCOL.md and
/// Docs/CUSTOM_LANGUAGE_MODELS.md.

/// `earshot.language-model.prepare`: prepare the exported custom language model data in the
/// payload for the caller (uid and app); with `ignores_cache`, rebuild it even if it is prepared.
/// `client_identifier` (Apple's deprecated argument) is kept with the model and listed.
public struct PrepareLanguageModelRequest: WireEvent, Hashable {
    public static let eventType = "earshot.language-model.prepare"
    public var id: String?
    public var ignoresCache: Bool
    public var clientIdentifier: String?
    public init(id: String? = nil, ignoresCache: Bool = false, clientIdentifier: String? = nil) {
        self.id = id
        self.ignoresCache = ignoresCache
        self.clientIdentifier = clientIdentifier
    }
    enum CodingKeys: String, CodingKey { case id, ignoresCache = "ignores_cache", clientIdentifier = "client_identifier" }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decodeIfPresent(String.self, forKey: .id)
        ignoresCache = try c.decodeIfPresent(Bool.self, forKey: .ignoresCache) ?? false
        clientIdentifier = try c.decodeIfPresent(String.self, forKey: .clientIdentifier)
    }
}

/// A prepared custom language model as the protocol reports it.
public struct PreparedLanguageModelInfo: Codable, Sendable, Hashable {
    /// The handle sessions name it by (a digest of the data and the engine it was built for).
    public var model: String
    public var identifier: String
    public var version: String
    public var locale: String
    public var uid: UInt32
    public var appId: String
    /// The client identifier the app gave (Apple's deprecated argument), if any.
    public var clientIdentifier: String?
    /// Phrases after templates were expanded, and distinct words.
    public var phrases: Int
    public var words: Int
    /// Unix time it was prepared.
    public var prepared: Double
    public init(model: String, identifier: String, version: String, locale: String, uid: UInt32, appId: String, clientIdentifier: String? = nil,
                phrases: Int, words: Int, prepared: Double) {
        self.model = model
        self.identifier = identifier
        self.version = version
        self.locale = locale
        self.uid = uid
        self.appId = appId
        self.clientIdentifier = clientIdentifier
        self.phrases = phrases
        self.words = words
        self.prepared = prepared
    }
    enum CodingKeys: String, CodingKey {
        case model, identifier, version, locale, uid, appId = "app_id", clientIdentifier = "client_identifier", phrases, words, prepared
    }
}

/// `earshot.language-model.prepare.result`: the prepared model, and whether an earlier
/// preparation of the same data was reused.
public struct PrepareLanguageModelReply: WireEvent, Hashable {
    public static let eventType = "earshot.language-model.prepare.result"
    public var id: String?
    public var prepared: PreparedLanguageModelInfo
    public var reused: Bool
    public init(id: String?, prepared: PreparedLanguageModelInfo, reused: Bool) {
        self.id = id
        self.prepared = prepared
        self.reused = reused
    }
}

/// `earshot.language-model.list`: the caller's prepared models (with `all`, admins: everyone's).
public struct LanguageModelsRequest: WireEvent, Hashable {
    public static let eventType = "earshot.language-model.list"
    public var id: String?
    public var all: Bool
    public init(id: String? = nil, all: Bool = false) {
        self.id = id
        self.all = all
    }
    enum CodingKeys: String, CodingKey { case id, all }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decodeIfPresent(String.self, forKey: .id)
        all = try c.decodeIfPresent(Bool.self, forKey: .all) ?? false
    }
}

/// `earshot.language-model.list.result`.
public struct LanguageModelsReply: WireEvent, Hashable {
    public static let eventType = "earshot.language-model.list.result"
    public var id: String?
    public var models: [PreparedLanguageModelInfo]
    /// How many prepared models one app may keep.
    public var maximum: Int
    public init(id: String?, models: [PreparedLanguageModelInfo], maximum: Int) {
        self.id = id
        self.models = models
        self.maximum = maximum
    }
}

/// A dictation module's custom language model: a prepared model's handle and its weight.
public struct LanguageModelUse: Codable, Sendable, Hashable {
    public var model: String
    /// Share of the language-model probability, in (0, 1); nil: the engine's default.
    public var weight: Double?
    public init(model: String, weight: Double? = nil) {
        self.model = model
        self.weight = weight
    }
}
