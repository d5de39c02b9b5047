import EarshotSystem
import EarshotWire
import Foundation
import Testing
import TestSupport

/// The real `earshotd` on a temp socket, driven over the wire.
@Suite struct DaemonProtocolTests {
    @Test func pingIsAnsweredWithPongCarryingTheSameText() async throws {
        let daemon = try await TestDaemon()
        defer { Task { await daemon.cleanUp() } }
        let client = try TestConnection(daemon.socket)
        let reply = try #require(try await client.roundTrip(Ping(text: "hello there")))
        #expect(try reply.decode(Pong.self).text == "hello there")
    }

    @Test func helloRecordsAppIDAndPeerUID() async throws {
        let daemon = try await TestDaemon()
        defer { Task { await daemon.cleanUp() } }
        let client = try TestConnection(daemon.socket)
        let reply = try #require(try await client.roundTrip(Hello(id: "h1", appId: "com.example.notes")))
        let welcome = try reply.decode(Welcome.self)
        #expect(welcome.id == "h1")
        #expect(welcome.uid == getuid())
        #expect(welcome.admin) // the daemon's own uid is an admin of a user daemon
        #expect(welcome.protocolVersion == WireProtocol.earshotVersion)
        #expect(welcome.daemonVersion == EarshotVersion.string)
        #expect(welcome.limits.frame == FrameLimits.default)
    }

    @Test func helloWithInvalidAppIDIsABadRequest() async throws {
        let daemon = try await TestDaemon()
        defer { Task { await daemon.cleanUp() } }
        let client = try TestConnection(daemon.socket)
        let reply = try #require(try await client.roundTrip(Hello(id: "x", appId: "not an id/..")))
        let error = try reply.decode(ErrorEvent.self)
        #expect(error.code == .badRequest)
        #expect(error.id == "x")
    }

    @Test func unknownEventGetsAnErrorAndTheConnectionStaysOpen() async throws {
        let daemon = try await TestDaemon()
        defer { Task { await daemon.cleanUp() } }
        let client = try TestConnection(daemon.socket)
        try client.sendRaw(Array(#"{"type":"no-such-event","data":{"id":"q"}}"#.utf8) + [0x0A])
        let error = try #require(try await client.next()).decode(ErrorEvent.self)
        #expect(error.code == .unknownEvent)
        #expect(error.id == "q")
        let pong = try #require(try await client.roundTrip(Ping(text: "still here")))
        #expect(try pong.decode(Pong.self).text == "still here")
    }

    @Test func requestWithWrongFieldTypesIsABadRequestAndTheConnectionStaysOpen() async throws {
        let daemon = try await TestDaemon()
        defer { Task { await daemon.cleanUp() } }
        let client = try TestConnection(daemon.socket)
        try client.sendRaw(Array(#"{"type":"earshot.hello","data":{"id":"7","protocol_version":"one","app_id":"a.b"}}"#.utf8) + [0x0A])
        let error = try #require(try await client.next()).decode(ErrorEvent.self)
        #expect(error.code == .badRequest)
        #expect(error.text.contains("protocol_version"))
        #expect(try #require(try await client.roundTrip(Ping())).type == Pong.eventType)
    }

    @Test func garbageFromOneClientClosesOnlyThatClient() async throws {
        let daemon = try await TestDaemon()
        defer { Task { await daemon.cleanUp() } }
        let good = try TestConnection(daemon.socket)
        let bad = try TestConnection(daemon.socket)
        #expect(try #require(try await good.roundTrip(Ping(text: "1"))).type == Pong.eventType)
        try bad.sendRaw(Array("this is not json\n".utf8))
        let error = try #require(try await bad.next()).decode(ErrorEvent.self)
        #expect(error.code == .malformedFrame)
        #expect(try await bad.next() == nil) // closed by the daemon
        #expect(try #require(try await good.roundTrip(Ping(text: "2"))).decode(Pong.self).text == "2")
    }

    @Test func oversizedPayloadIsRefusedBeforeItIsBuffered() async throws {
        let daemon = try await TestDaemon(config: "[Limits]\nMaxPayloadBytes=4096\n")
        defer { Task { await daemon.cleanUp() } }
        let client = try TestConnection(daemon.socket)
        try client.sendRaw(Array(#"{"type":"audio-chunk","payload_length":1000000000}"#.utf8) + [0x0A])
        let error = try #require(try await client.next()).decode(ErrorEvent.self)
        #expect(error.code == .malformedFrame)
        #expect(error.text.contains("4096"))
    }

    @Test func frameSplitIntoSingleBytesIsDecoded() async throws {
        let daemon = try await TestDaemon()
        defer { Task { await daemon.cleanUp() } }
        let client = try TestConnection(daemon.socket)
        for byte in try Frame(Ping(text: "slow")).encoded() {
            try client.sendRaw([byte])
        }
        #expect(try #require(try await client.next()).decode(Pong.self).text == "slow")
    }

    @Test func connectionLimitRefusesTheExtraClient() async throws {
        let daemon = try await TestDaemon(config: "[Limits]\nMaxConnections=2\n")
        defer { Task { await daemon.cleanUp() } }
        let first = try TestConnection(daemon.socket)
        // Wait until the daemon has let go of the readiness probe's connection.
        while try #require(try await first.roundTrip(StatusRequest())).decode(DaemonStatus.self).connections > 1 {
            try await Task.sleep(for: .milliseconds(10))
        }
        let second = try TestConnection(daemon.socket)
        #expect(try #require(try await second.roundTrip(Ping())).type == Pong.eventType)
        let third = try TestConnection(daemon.socket)
        let error = try #require(try await third.next()).decode(ErrorEvent.self)
        #expect(error.code == .insufficientResources)
        #expect(try #require(try await first.roundTrip(Ping())).type == Pong.eventType)
    }

    @Test func clientThatNeverReadsIsDisconnectedWithoutHurtingOthers() async throws {
        let daemon = try await TestDaemon(config: "[Limits]\nOutputStallTimeoutSec=1\n")
        defer { Task { await daemon.cleanUp() } }
        let good = try TestConnection(daemon.socket)
        // The slow client only writes: describe replies pile up in its socket and the daemon's queue.
        let slow = try UnixSocketWriter(daemon.socket)
        let request = try Frame(Describe()).encoded()
        var sent = 0
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline, await slow.write(request) { sent += 1 }
        #expect(sent > 0)
        #expect(ContinuousClock.now < deadline, "the daemon never dropped the client that does not read")
        #expect(try #require(try await good.roundTrip(Ping(text: "ok"))).decode(Pong.self).text == "ok")
    }

    @Test func wyomingPythonClientGetsValidInfo() async throws {
        let daemon = try await TestDaemon()
        defer { Task { await daemon.cleanUp() } }
        let script = """
            import asyncio, sys
            from wyoming.client import AsyncClient
            from wyoming.info import Describe, Info
            from wyoming.ping import Ping, Pong
            async def main():
                async with AsyncClient.from_uri("unix://" + sys.argv[1]) as client:
                    await client.write_event(Describe().event())
                    event = await client.read_event()
                    assert Info.is_type(event.type), event.type
                    info = Info.from_event(event)
                    assert len(info.asr) == 1 and info.asr[0].name == "earshot" and info.asr[0].installed
                    await client.write_event(Ping(text="py").event())
                    pong = Pong.from_event(await client.read_event())
                    assert pong.text == "py"
                    print("asr", info.asr[0].name, info.asr[0].version)
            asyncio.run(main())
            """
        let result = try await ChildProcess.run("/usr/bin/env", ["python3", "-c", script, daemon.socket], in: daemon.directory)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("asr earshot \(EarshotVersion.string)"))
    }
}

/// A raw writer on a non-blocking socket that reports when the daemon has closed the connection.
struct UnixSocketWriter {
    let fd: Int32
    init(_ path: String) throws {
        fd = try UnixSocket.connect(path: path)
    }
    /// Writes all of `bytes`, pausing while the socket is full; false once the peer closed.
    func write(_ bytes: [UInt8]) async -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 {
                offset += n
            } else if n < 0 && (errno == EAGAIN || errno == EINTR) {
                try? await Task.sleep(for: .milliseconds(10))
            } else {
                return false
            }
        }
        return true
    }
}
