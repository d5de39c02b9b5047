import Foundation
import Testing
import TestSupport

/// `[Wyoming] Zeroconf=yes` (issue 12 item 5): the Wyoming TCP listener is announced as
/// `_wyoming._tcp` through a real avahi-daemon on a private D-Bus, as Home Assistant discovers it,
/// and `avahi-browse` resolves it to the listener's address and port; without avahi the daemon
/// warns, keeps serving, and announces once avahi starts.
@Suite(.serialized, .enabled(if: EmbeddedModels.runs(AvahiDaemon.available), "needs dbus-daemon, avahi-daemon and avahi-utils (Scripts/setup.sh)"))
struct ZeroconfTests {
    static let describe = """
    import asyncio, sys
    from wyoming.client import AsyncClient
    from wyoming.event import Event

    async def main(uri):
        async with AsyncClient.from_uri(uri) as client:
            await client.write_event(Event(type="describe"))
            print((await asyncio.wait_for(client.read_event(), 30)).type)

    asyncio.run(main(sys.argv[1]))
    """

    /// Wyoming's `describe` over TCP answers `info`: the listener serves.
    static func expectServes(_ daemon: TestDaemon, host: String = "127.0.0.1", port: UInt16) async throws {
        let script = try daemon.directory.write("describe.py", Self.describe)
        let run = try await ChildProcess.run("/usr/bin/env", ["python3", script, "tcp://\(host):\(port)"], in: daemon.directory)
        #expect(run.stdout == "info\n", "Wyoming over TCP serves: \(run.stdout) \(run.stderr)")
    }

    @Test func wyomingListenerIsAnnouncedAndWithdrawnAtShutdown() async throws {
        let avahi = try await AvahiDaemon()
        let browser = try avahi.browse("_wyoming._tcp")
        var daemon: TestDaemon?
        do {
            let address = try #require(AvahiDaemon.multicastIPv4Address(), "no multicast IPv4 interface for avahi")
            let port = try LoopbackPort.free()
            let started = try await TestDaemon(config: "[Wyoming]\nListen=tcp://\(address):\(port)\nZeroconf=yes\n", environment: avahi.environment)
            daemon = started
            try await browser.wait { $0.resolved.contains { $0.port == port } }
            let service = try #require(browser.resolved.first { $0.port == port })
            #expect(service.name == "earshot" && service.type == "_wyoming._tcp" && service.address == address, "\(service)")
            try await started.waitForLog("zeroconf: announced 'earshot' as _wyoming._tcp on port \(port)")
            try await Self.expectServes(started, host: address, port: port)
            // SIGTERM: the daemon withdraws the announcement as it shuts down.
            #expect(await started.terminate() == 0)
            try await browser.wait { $0.removed.contains("earshot") }
        } catch {
            await browser.stop()
            await daemon?.cleanUp()
            await avahi.stop()
            throw error
        }
        await browser.stop()
        await daemon?.cleanUp()
        await avahi.stop()
    }

    @Test func withoutDBusTheDaemonWarnsAndKeepsServing() async throws {
        let port = try LoopbackPort.free()
        let daemon = try await TestDaemon(config: "[Wyoming]\nListen=tcp://0.0.0.0:\(port)\nZeroconf=yes\n",
                                          environment: ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/nonexistent/earshot-test-bus"])
        do {
            try await daemon.waitForLog("earshotd[warning]: zeroconf: avahi is not reachable (Daemon not running); _wyoming._tcp is not announced")
            try await Self.expectServes(daemon, port: port)
        } catch {
            await daemon.cleanUp()
            throw error
        }
        await daemon.cleanUp()
    }

    @Test func withoutAvahiTheDaemonWarnsKeepsServingAndAnnouncesOnceAvahiStartsOrRestarts() async throws {
        let stack = try await AvahiDaemon(avahi: false)
        let port = try LoopbackPort.free()
        var daemon: TestDaemon?
        var browser: AvahiDaemon.Browser?
        do {
            let started = try await TestDaemon(config: "[Wyoming]\nListen=tcp://0.0.0.0:\(port)\nZeroconf=yes\n", environment: stack.environment)
            daemon = started
            try await started.waitForLog("earshotd[warning]: zeroconf: avahi-daemon is not running; _wyoming._tcp on port \(port) is announced once it starts")
            try await Self.expectServes(started, port: port)
            try await stack.startAvahi()
            let watching = try stack.browse("_wyoming._tcp")
            browser = watching
            try await watching.wait(timeout: .seconds(40)) { $0.resolved.contains { $0.port == port && $0.name == "earshot" } }
            await watching.stop()
            // avahi restarts: the daemon waits for it and announces again.
            await stack.stopAvahi()
            try await started.waitForLog("earshotd[warning]: zeroconf: avahi-daemon went away; _wyoming._tcp on port \(port) is announced again once it is back")
            try await stack.startAvahi()
            let again = try stack.browse("_wyoming._tcp")
            browser = again
            try await again.wait(timeout: .seconds(40)) { $0.resolved.contains { $0.port == port && $0.name == "earshot" } }
        } catch {
            await browser?.stop()
            await daemon?.cleanUp()
            await stack.stop()
            throw error
        }
        await browser?.stop()
        await daemon?.cleanUp()
        await stack.stop()
    }

    @Test func aLoopbackListenerIsNotAnnounced() async throws {
        let port = try LoopbackPort.free()
        let daemon = try await TestDaemon(config: "[Wyoming]\nListen=tcp://127.0.0.1:\(port)\nZeroconf=yes\n")
        do {
            try await daemon.waitForLog("earshotd[warning]: zeroconf: not announcing _wyoming._tcp: [Wyoming] Listen is the loopback address 127.0.0.1, which no other host can reach")
        } catch {
            await daemon.cleanUp()
            throw error
        }
        await daemon.cleanUp()
    }
}
