@testable import EarshotDaemon
import EarshotSystem
import Foundation
import Testing
import TestSupport

/// Issue 27: the slot accounting every front shares — a peer at its limit is refused while the
/// others are served; network peers are limited per address within their user's total.
struct PeerSlotsTests {
    @Test func aUidAtItsLimitIsRefusedWhileOtherUidsAreServed() {
        var slots = PeerSlots(limits: ConnectionLimits(maxConnections: 64, maxPerUser: 8, adminReserved: 4))
        for _ in 0..<8 { #expect(slots.admit(.local(uid: 1000, admin: false)) == nil) }
        let refused = slots.admit(.local(uid: 1000, admin: false))
        #expect(refused?.everyone == false && refused?.message.contains("uid 1000") == true)
        #expect(slots.admit(.local(uid: 1001, admin: false)) == nil, "another user is served")
        slots.release(.local(uid: 1000, admin: false))
        #expect(slots.admit(.local(uid: 1000, admin: false)) == nil, "a released slot is free again")
    }

    @Test func theNonAdminShareLeavesRoomForAdmins() {
        var slots = PeerSlots(limits: ConnectionLimits(maxConnections: 6, maxPerUser: 2, adminReserved: 2))
        for uid in UInt32(1)...2 { for _ in 0..<2 { #expect(slots.admit(.local(uid: uid, admin: false)) == nil) } }
        let full = slots.admit(.local(uid: 3, admin: false))
        #expect(full?.everyone == true, "the non-admin share is used up: 503 for everyone")
        #expect(slots.admit(.local(uid: 0, admin: true)) == nil && slots.admit(.local(uid: 0, admin: true)) == nil)
        #expect(slots.admit(.local(uid: 0, admin: true))?.everyone == true, "then the front is full")
    }

    @Test func oneNetworkHostCannotUseUpWhatEveryHostShares() {
        // Wyoming over TCP: every host acts as uid 65534, which may hold 32 connections.
        var slots = PeerSlots(limits: ConnectionLimits(maxConnections: 256, maxPerUser: 32, adminReserved: 16, maxPerAddress: 8))
        for _ in 0..<8 { #expect(slots.admit(.network(uid: 65534, host: "127.0.0.1")) == nil) }
        #expect(slots.admit(.network(uid: 65534, host: "127.0.0.1"))?.message.contains("127.0.0.1") == true)
        #expect(slots.admit(.network(uid: 65534, host: "127.0.0.2")) == nil, "another host is served")
        // Within the user's total: 32 across hosts, then no more from any of them.
        for index in 3...5 { for _ in 0..<(index == 5 ? 7 : 8) { #expect(slots.admit(.network(uid: 65534, host: "127.0.0.\(index)")) == nil) } }
        #expect(slots.admit(.network(uid: 65534, host: "127.0.0.9"))?.message.contains("per user") == true)
        // The HTTP front lets network peers share its whole non-admin part.
        var http = PeerSlots(limits: ConnectionLimits(maxConnections: 64, maxPerUser: 8, adminReserved: 4, maxPerAddress: 8, maxNetworkUser: 60))
        for host in 1...3 { for _ in 0..<8 { #expect(http.admit(.network(uid: 65534, host: "10.0.0.\(host)")) == nil) } }
    }

    @Test func refusalsAreLoggedOncePerBurst() {
        let clock = ManualClock()
        let log = RefusalLog(logger: Logger(minimum: .error, environment: [:]), clock: clock, quiet: .seconds(60))
        #expect(log.refused("uid 1000", "too many"))
        for _ in 0..<39 {
            clock.advance(by: .seconds(1))
            #expect(!log.refused("uid 1000", "too many"), "the same burst")
        }
        #expect(log.refused("uid 1001", "too many"), "another peer's burst")
        clock.advance(by: .seconds(61))
        #expect(log.refused("uid 1000", "too many"), "a new burst after a quiet minute")
    }
}
