import EarshotWire

/// Who may hold how many connections on one front (`[Limits]` for the socket and Wyoming-TCP
/// fronts, `[HTTP]` for the HTTP front).
struct ConnectionLimits: Sendable {
    /// Every connection together.
    var maxConnections: Int
    /// One non-admin uid's (local peers; network peers' user, all addresses together).
    var maxPerUser: Int
    /// Slots only admins may take.
    var adminReserved: Int
    /// One network address's, within its user's ``maxPerUser``: one host cannot use up what every
    /// other host shares.
    var maxPerAddress: Int = 8
    /// The network peers' user's, all addresses together, when it differs from ``maxPerUser``.
    var maxNetworkUser: Int?

    /// What non-admin connections together may hold: at least one.
    var nonAdminSlots: Int { max(1, maxConnections - adminReserved) }
}

/// The slot accounting every front shares: connections in total, non-admin ones, per uid and per
/// network address. A peer at its limit is refused; the others are still served. Not thread-safe:
/// its owner serializes it (``ConnectionRegistry``'s actor, ``HTTPAdmission``'s lock).
struct PeerSlots {
    /// A connection's peer as the limits see it.
    enum Peer: Hashable {
        /// A local process (kernel-verified uid).
        case local(uid: UInt32, admin: Bool)
        /// A network peer acting as the configured `uid`, from `host`.
        case network(uid: UInt32, host: String)

        var admin: Bool { if case .local(_, true) = self { true } else { false } }
        var uid: UInt32 {
            switch self {
            case .local(let uid, _), .network(let uid, _): uid
            }
        }
    }

    /// Why a connection was refused; `everyone` when the front is full for all non-admins (503),
    /// else this peer is at its own limit (429).
    struct Refusal: Error, Sendable {
        var message: String
        var everyone: Bool
        var wire: WireError { WireError(.insufficientResources, message) }
    }

    let limits: ConnectionLimits
    private(set) var total = 0
    private var nonAdmin = 0
    private var perUser: [UInt32: Int] = [:]
    private var perAddress: [String: Int] = [:]

    init(limits: ConnectionLimits) { self.limits = limits }

    /// Takes a slot for `peer`, or says why not.
    mutating func admit(_ peer: Peer) -> Refusal? {
        if total >= limits.maxConnections {
            return Refusal(message: "too many connections (limit \(limits.maxConnections))", everyone: true)
        }
        if !peer.admin {
            if nonAdmin >= limits.nonAdminSlots {
                return Refusal(message: "all \(limits.nonAdminSlots) connection slots for non-admin clients are in use (the other \(limits.maxConnections - limits.nonAdminSlots) are reserved for admins)",
                               everyone: true)
            }
            let userLimit = if case .network = peer { limits.maxNetworkUser ?? limits.maxPerUser } else { limits.maxPerUser }
            if perUser[peer.uid, default: 0] >= userLimit {
                return Refusal(message: "too many connections from uid \(peer.uid) (limit \(userLimit) per user)", everyone: false)
            }
            if case .network(_, let host) = peer, perAddress[host, default: 0] >= limits.maxPerAddress {
                return Refusal(message: "too many connections from \(host) (limit \(limits.maxPerAddress) per address)", everyone: false)
            }
            nonAdmin += 1
            perUser[peer.uid, default: 0] += 1
            if case .network(_, let host) = peer { perAddress[host, default: 0] += 1 }
        }
        total += 1
        return nil
    }

    /// Gives back the slot an admitted `peer` held.
    mutating func release(_ peer: Peer) {
        total -= 1
        guard !peer.admin else { return }
        nonAdmin -= 1
        perUser[peer.uid] = Self.decremented(perUser[peer.uid])
        if case .network(_, let host) = peer { perAddress[host] = Self.decremented(perAddress[host]) }
    }

    private static func decremented(_ count: Int?) -> Int? {
        let left = (count ?? 1) - 1
        return left > 0 ? left : nil
    }
}
