@testable import EarshotDaemon
import EarshotSystem
import EarshotWire
import Foundation
import Testing

/// The route table: each event type's privilege is declared once on its route and checked there,
/// after decoding and before the handler runs.
@Suite struct RouteTests {
    /// A request context (an admin peer, root, or uid 1000) on one end of a socketpair; nothing is sent on it.
    static func context(admin: Bool) throws -> (context: RequestContext, fds: [Int32]) {
        var fds: [Int32] = [0, 0]
        try systemCall("socketpair") { socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) }
        let state = ConnectionState(channel: FrameChannel(fd: fds[0], label: "test.route"))
        return (RequestContext(connectionID: 1, peer: PeerCredentials(pid: 1, uid: admin ? 0 : 1000, gid: 1000), admin: admin, state: state), fds)
    }

    static func serve(_ route: Route, _ event: some WireEvent, admin: Bool) async throws -> [Frame] {
        var (context, fds) = try context(admin: admin)
        defer { context.state?.channel.close(); close(fds[1]) }
        return try await route.serve(Call(frame: try Frame(event), progress: { _ in }), &context)
    }

    static func code(_ body: () async throws -> [Frame]) async -> ErrorCode? {
        do {
            _ = try await body()
            return nil
        } catch {
            return ErrorMap.classify(error).code
        }
    }

    @Test func anAdminRouteRefusesOthersBeforeItsHandlerRuns() async throws {
        let route = Route.on(GCRequest.self, .admin("run garbage collection")) { request, _, _ in
            [try Frame(GCReply(id: request.id, dryRun: true, removed: [], freedBytes: 0, expiredReservations: []))]
        }
        #expect(await Self.code { try await Self.serve(route, GCRequest(id: "g"), admin: false) } == .permissionDenied)
        let replies = try await Self.serve(route, GCRequest(id: "g"), admin: true)
        #expect(replies.map(\.type) == [GCReply.eventType])
    }

    @Test func aConditionalPrivilegeAppliesOnlyWhenTheRequestAsksForMore() async throws {
        let route = Route.on(ReservationsRequest.self, .admin("list every client's reservations", when: { request, _ in request.all })) { request, _, _ in
            [try Frame(ReservationsReply(id: request.id, reservations: [], maximum: 1))]
        }
        #expect(await Self.code { try await Self.serve(route, ReservationsRequest(id: "own"), admin: false) } == nil)
        #expect(await Self.code { try await Self.serve(route, ReservationsRequest(id: "all", all: true), admin: false) } == .permissionDenied)
        #expect(await Self.code { try await Self.serve(route, ReservationsRequest(id: "all", all: true), admin: true) } == nil)
    }

    @Test func badDataIsBadRequestEvenForAnAdminRoute() async throws {
        let route = Route.on(GCRequest.self, .admin("run garbage collection")) { _, _, _ in [] }
        var (context, fds) = try Self.context(admin: false)
        defer { context.state?.channel.close(); close(fds[1]) }
        var frame = try Frame(GCRequest(id: "g"))
        frame.data["dry_run"] = .string("yes")
        let code = await Self.code { try await route.serve(Call(frame: frame, progress: { _ in }), &context) }
        #expect(code == .badRequest)
    }

    @Test func theTableFindsEachRouteByItsEventType() {
        let table = RouteTable([Route.on(Ping.self) { _, _, _ in [] }, Route.on(InstallRequest.self, longRunning: true) { _, _, _ in [] }])
        #expect(table[Ping.eventType]?.longRunning == false)
        #expect(table[InstallRequest.eventType]?.longRunning == true)
        #expect(table["earshot.no-such-request"] == nil)
    }
}
