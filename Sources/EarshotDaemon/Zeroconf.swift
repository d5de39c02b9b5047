import CAvahi
import EarshotSystem
import Foundation

/// Announces one DNS-SD service (`_wyoming._tcp` for the Wyoming TCP listener) through the
/// avahi daemon, on avahi-client's own thread (its threaded poll). When avahi is not running the
/// daemon keeps serving: a warning says so, and the service is announced once avahi starts (or
/// comes back after a restart). A name another host already announces gets avahi's alternative
/// (`earshot #2`).
final class ZeroconfAnnouncer: @unchecked Sendable {
    // @unchecked: `client`, `group`, `name` and `warnedNotRunning` are only touched in avahi's
    // callbacks (on its poll thread, under its lock) or before the poll starts and after it stops.
    private let poll: OpaquePointer
    private var client: OpaquePointer?
    private var group: OpaquePointer?
    private var name: String
    private let type: String
    private let port: UInt16
    private let interface: Int32
    private let family: Int32
    private let logger: Logger
    private var warnedNotRunning = false

    /// The service `name` of `type` on `port`, announced on `interface` (an index; `AVAHI_IF_UNSPEC`:
    /// all) for `family` (`AVAHI_PROTO_INET`, `_INET6` or `_UNSPEC`). Nil (with a warning) when
    /// avahi's client library cannot start at all.
    init?(name: String, type: String, port: UInt16, interface: Int32, family: Int32, logger: Logger) {
        guard let poll = avahi_threaded_poll_new() else {
            logger.warning("zeroconf: cannot start avahi's event loop; \(type) is not announced")
            return nil
        }
        self.poll = poll
        self.name = name
        self.type = type
        self.port = port
        self.interface = interface
        self.family = family
        self.logger = logger
        guard connect() else {
            avahi_threaded_poll_free(poll)
            return nil
        }
        avahi_threaded_poll_start(poll)
    }

    /// A client that waits for avahi-daemon when it is not there (`AVAHI_CLIENT_NO_FAIL`); false
    /// (with a warning) when D-Bus itself cannot be reached.
    private func connect() -> Bool {
        var error: Int32 = 0
        client = avahi_client_new(avahi_threaded_poll_get(poll), AVAHI_CLIENT_NO_FAIL, { client, state, context in
            guard let client, let context else { return }
            Unmanaged<ZeroconfAnnouncer>.fromOpaque(context).takeUnretainedValue().clientChanged(client, state)
        }, Unmanaged.passUnretained(self).toOpaque(), &error)
        if client == nil { logger.warning("zeroconf: avahi is not reachable (\(String(cString: avahi_strerror(error)))); \(type) is not announced") }
        return client != nil
    }

    /// The avahi-client version linked in (from its package note; avahi has no version call).
    static var linkedLibrary: LinkedLibrary { .identify(sharedObject: "libavahi-client.so", name: "avahi-client") }

    /// Withdraws the announcement and stops avahi's thread.
    func stop() {
        avahi_threaded_poll_stop(poll)
        if let client { avahi_client_free(client) } // frees its entry groups
        client = nil
        group = nil
        avahi_threaded_poll_free(poll)
    }

    /// Announces the Wyoming TCP listener on `host:port` as `_wyoming._tcp` (`[Wyoming]
    /// Zeroconf=yes`): on every interface for a wildcard address, else on the one holding `host`.
    /// A loopback address is not announced (no other host could connect): a warning says so.
    static func wyoming(host: String, port: UInt16, logger: Logger) -> ZeroconfAnnouncer? {
        let type = "_wyoming._tcp"
        if TCPSocket.isLoopback(host) {
            logger.warning("zeroconf: not announcing \(type): [Wyoming] Listen is the loopback address \(host), which no other host can reach")
            return nil
        }
        let family = Int32(host.contains(":") ? (host == "::" ? AVAHI_PROTO_UNSPEC : AVAHI_PROTO_INET6) : AVAHI_PROTO_INET)
        let interface = host == "0.0.0.0" || host == "::" ? Int32(AVAHI_IF_UNSPEC) : NetworkInterfaces.addresses().first { $0.address == host && $0.index > 0 }.map { Int32($0.index) } ?? Int32(AVAHI_IF_UNSPEC)
        return ZeroconfAnnouncer(name: "earshot", type: type, port: port, interface: interface, family: family, logger: logger)
    }

    // MARK: - Callbacks (avahi's poll thread)

    private func clientChanged(_ client: OpaquePointer, _ state: AvahiClientState) {
        switch state {
        case AVAHI_CLIENT_S_RUNNING:
            warnedNotRunning = false
            register(client)
        case AVAHI_CLIENT_S_COLLISION, AVAHI_CLIENT_S_REGISTERING:
            // The host name changed or collides: announce again once it is settled.
            if let group { avahi_entry_group_reset(group) }
        case AVAHI_CLIENT_CONNECTING:
            if !warnedNotRunning {
                warnedNotRunning = true
                logger.warning("zeroconf: avahi-daemon is not running; \(type) on port \(port) is announced once it starts", ["zeroconf_type": type])
            }
        case AVAHI_CLIENT_FAILURE where avahi_client_errno(client) == AVAHI_ERR_DISCONNECTED:
            // avahi-daemon went away (a restart): its groups went with it; wait for it again.
            logger.warning("zeroconf: avahi-daemon went away; \(type) on port \(port) is announced again once it is back", ["zeroconf_type": type])
            avahi_client_free(client)
            group = nil
            warnedNotRunning = true
            _ = connect()
        case AVAHI_CLIENT_FAILURE:
            logger.warning("zeroconf: avahi failed: \(String(cString: avahi_strerror(avahi_client_errno(client)))); \(type) is not announced")
        default:
            break
        }
    }

    private func groupChanged(_ group: OpaquePointer, _ state: AvahiEntryGroupState) {
        switch state {
        case AVAHI_ENTRY_GROUP_ESTABLISHED:
            logger.notice("zeroconf: announced '\(name)' as \(type) on port \(port)", ["zeroconf_name": name, "zeroconf_type": type])
        case AVAHI_ENTRY_GROUP_COLLISION:
            if let alternative = avahi_alternative_service_name(name) {
                logger.notice("zeroconf: the name '\(name)' is taken; trying '\(String(cString: alternative))'")
                name = String(cString: alternative)
                avahi_free(alternative)
            }
            if let client = avahi_entry_group_get_client(group) { register(client) }
        case AVAHI_ENTRY_GROUP_FAILURE:
            logger.warning("zeroconf: announcing \(type) failed: \(String(cString: avahi_strerror(avahi_client_errno(avahi_entry_group_get_client(group)))))")
        default:
            break
        }
    }

    private func register(_ client: OpaquePointer) {
        if group == nil {
            group = avahi_entry_group_new(client, { group, state, context in
                guard let group, let context else { return }
                Unmanaged<ZeroconfAnnouncer>.fromOpaque(context).takeUnretainedValue().groupChanged(group, state)
            }, Unmanaged.passUnretained(self).toOpaque())
        }
        guard let group else {
            logger.warning("zeroconf: avahi refused an entry group: \(String(cString: avahi_strerror(avahi_client_errno(client))))")
            return
        }
        avahi_entry_group_reset(group)
        let added = avahi_entry_group_add_service_strlst(group, interface, family, AvahiPublishFlags(0), name, type, nil, nil, port, nil)
        let committed = added < 0 ? added : avahi_entry_group_commit(group)
        if committed == AVAHI_ERR_COLLISION {
            groupChanged(group, AVAHI_ENTRY_GROUP_COLLISION)
        } else if committed < 0 {
            logger.warning("zeroconf: announcing \(type) failed: \(String(cString: avahi_strerror(committed)))")
        }
    }
}
