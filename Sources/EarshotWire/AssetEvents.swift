/// Asset inventory events (`earshot.*` requests with `.result` replies). See Docs/PROTOCOL.md.

/// A reservation as the protocol reports it.
public struct ReservationInfo: Codable, Sendable, Hashable {
    public var uid: UInt32
    public var appId: String
    public var locale: String
    /// Unix time the reservation was made.
    public var created: Double
    /// Unix time it was last used (install, status, analysis); expiry counts from here.
    public var lastUsed: Double
    public init(uid: UInt32, appId: String, locale: String, created: Double, lastUsed: Double) {
        self.uid = uid
        self.appId = appId
        self.locale = locale
        self.created = created
        self.lastUsed = lastUsed
    }
    enum CodingKeys: String, CodingKey { case uid, appId = "app_id", locale, created, lastUsed = "last_used" }
}

/// `earshot.module-status`: the aggregate and per-module status of `modules`.
public struct ModuleStatusRequest: WireEvent, Hashable {
    public static let eventType = "earshot.module-status"
    public var id: String?
    public var modules: [ModuleConfiguration]
    public init(id: String? = nil, modules: [ModuleConfiguration]) {
        self.id = id
        self.modules = modules
    }
}

/// `earshot.module-status.result`.
public struct ModuleStatusReply: WireEvent, Hashable {
    public static let eventType = "earshot.module-status.result"
    public var id: String?
    public var status: AssetStatus
    /// One status per requested module, in order.
    public var modules: [AssetStatus]
    public init(id: String?, status: AssetStatus, modules: [AssetStatus]) {
        self.id = id
        self.status = status
        self.modules = modules
    }
}

/// `earshot.locales`: supported or installed locales for a module kind.
public struct LocalesRequest: WireEvent, Hashable {
    public static let eventType = "earshot.locales"
    public var id: String?
    public var kind: AssetKind
    /// `true` for installed locales, `false` for every supported one.
    public var installed: Bool
    /// With `equivalent_to`: only the best supported match for that locale.
    public var equivalentTo: String?
    public init(id: String? = nil, kind: AssetKind, installed: Bool = false, equivalentTo: String? = nil) {
        self.id = id
        self.kind = kind
        self.installed = installed
        self.equivalentTo = equivalentTo
    }
    enum CodingKeys: String, CodingKey { case id, kind, installed, equivalentTo = "equivalent_to" }
}

/// `earshot.locales.result`: canonical BCP-47 tags.
public struct LocalesReply: WireEvent, Hashable {
    public static let eventType = "earshot.locales.result"
    public var id: String?
    public var locales: [String]
    public init(id: String?, locales: [String]) {
        self.id = id
        self.locales = locales
    }
}

/// `earshot.reserve`: reserve a locale for the calling (uid, app id).
public struct ReserveRequest: WireEvent, Hashable {
    public static let eventType = "earshot.reserve"
    public var id: String?
    public var locale: String
    public init(id: String? = nil, locale: String) {
        self.id = id
        self.locale = locale
    }
}

/// `earshot.reserve.result`: whether a new reservation was made.
public struct ReserveReply: WireEvent, Hashable {
    public static let eventType = "earshot.reserve.result"
    public var id: String?
    public var created: Bool
    public init(id: String?, created: Bool) {
        self.id = id
        self.created = created
    }
}

/// `earshot.release`: release a reservation — the caller's own, or (admins) any client's.
public struct ReleaseRequest: WireEvent, Hashable {
    public static let eventType = "earshot.release"
    public var id: String?
    public var locale: String
    /// Admins only: whose reservation (default: the caller's).
    public var uid: UInt32?
    public var appId: String?
    public init(id: String? = nil, locale: String, uid: UInt32? = nil, appId: String? = nil) {
        self.id = id
        self.locale = locale
        self.uid = uid
        self.appId = appId
    }
    enum CodingKeys: String, CodingKey { case id, locale, uid, appId = "app_id" }
}

/// `earshot.release.result`: whether a reservation was removed.
public struct ReleaseReply: WireEvent, Hashable {
    public static let eventType = "earshot.release.result"
    public var id: String?
    public var released: Bool
    public init(id: String?, released: Bool) {
        self.id = id
        self.released = released
    }
}

/// `earshot.reservations`: the caller's reservations, or (admins, `all`) everyone's.
public struct ReservationsRequest: WireEvent, Hashable {
    public static let eventType = "earshot.reservations"
    public var id: String?
    public var all: Bool
    public init(id: String? = nil, all: Bool = false) {
        self.id = id
        self.all = all
    }
}

/// `earshot.reservations.result`.
public struct ReservationsReply: WireEvent, Hashable {
    public static let eventType = "earshot.reservations.result"
    public var id: String?
    public var reservations: [ReservationInfo]
    /// The caller's quota (`maximumReservedLocales`).
    public var maximum: Int
    public init(id: String?, reservations: [ReservationInfo], maximum: Int) {
        self.id = id
        self.reservations = reservations
        self.maximum = maximum
    }
}

/// Install phases, in order.
public enum InstallPhase: String, Codable, Sendable, Hashable {
    case queued, downloading, verifying, extracting, committing, installed, failed, cancelled
    /// `earshotctl publish`: the asset's bytes are going to a registry.
    case uploading
}

/// `earshot.install`: make sure `modules` can run; progress events follow until the result.
public struct InstallRequest: WireEvent, Hashable {
    public static let eventType = "earshot.install"
    public var id: String?
    public var modules: [ModuleConfiguration]
    public init(id: String? = nil, modules: [ModuleConfiguration]) {
        self.id = id
        self.modules = modules
    }
}

/// `earshot.install.plan`: what installing `modules` would fetch, changing nothing (no job, no
/// reservation; `earshotctl install --dry-run`). A separate event, so a daemon that does not know
/// it refuses it (`unknownEvent`) instead of installing.
public struct InstallPlanRequest: WireEvent, Hashable {
    public static let eventType = "earshot.install.plan"
    public var id: String?
    public var modules: [ModuleConfiguration]
    public init(id: String? = nil, modules: [ModuleConfiguration]) {
        self.id = id
        self.modules = modules
    }
}

/// One asset an install would fetch.
public struct InstallPlanInfo: Codable, Sendable, Hashable {
    public var asset: String
    public var version: Int
    /// Bytes still to download (a partial download counts as fetched).
    public var downloadBytes: Int64
    /// What is left to download plus the installed size.
    public var spaceNeeded: Int64
    public init(asset: String, version: Int, downloadBytes: Int64, spaceNeeded: Int64) {
        self.asset = asset
        self.version = version
        self.downloadBytes = downloadBytes
        self.spaceNeeded = spaceNeeded
    }
    enum CodingKeys: String, CodingKey { case asset, version, downloadBytes = "download_bytes", spaceNeeded = "space_needed" }
}

/// `earshot.install.plan.result`: the missing assets (empty: everything is installed).
public struct InstallPlanReply: WireEvent, Hashable {
    public static let eventType = "earshot.install.plan.result"
    public var id: String?
    public var planned: [InstallPlanInfo]
    /// Free bytes of the state filesystem now.
    public var availableBytes: Int64
    public init(id: String?, planned: [InstallPlanInfo], availableBytes: Int64) {
        self.id = id
        self.planned = planned
        self.availableBytes = availableBytes
    }
    enum CodingKeys: String, CodingKey { case id, planned, availableBytes = "available_bytes" }
}

/// `earshot.install.progress`: one asset's progress, sent to every client waiting for it.
public struct InstallProgress: WireEvent, Hashable {
    public static let eventType = "earshot.install.progress"
    public var id: String?
    public var asset: String
    public var version: Int
    public var phase: InstallPhase
    public var bytesDone: Int64
    public var bytesTotal: Int64
    public init(id: String?, asset: String, version: Int, phase: InstallPhase, bytesDone: Int64, bytesTotal: Int64) {
        self.id = id
        self.asset = asset
        self.version = version
        self.phase = phase
        self.bytesDone = bytesDone
        self.bytesTotal = bytesTotal
    }
    enum CodingKeys: String, CodingKey {
        case id, asset, version, phase, bytesDone = "bytes_done", bytesTotal = "bytes_total"
    }
}

/// `earshot.install.result`: what was installed; `nothing_to_do` when all was already installed.
public struct InstallReply: WireEvent, Hashable {
    public static let eventType = "earshot.install.result"
    public var id: String?
    public var nothingToDo: Bool
    /// `id@version` of each asset installed by this request (or by the job it joined).
    public var installed: [String]
    /// Locales reserved automatically for the caller.
    public var reserved: [String]
    public init(id: String?, nothingToDo: Bool, installed: [String], reserved: [String]) {
        self.id = id
        self.nothingToDo = nothingToDo
        self.installed = installed
        self.reserved = reserved
    }
    enum CodingKeys: String, CodingKey { case id, nothingToDo = "nothing_to_do", installed, reserved }
}
