import EarshotSystem
import Foundation
import Testing
import TestSupport

/// Wyoming over TCP (`[Wyoming] Listen`), as Home Assistant connects: the PyPI client's TCP
/// transport gets `info` and a transcript; Earshot's own events are refused there; off by default.
@Suite(.serialized)
struct WyomingTCPTests {
    static let adminProbe = """
    import asyncio, json, sys
    from wyoming.client import AsyncClient
    from wyoming.event import Event

    async def main(uri):
        async with AsyncClient.from_uri(uri) as client:
            await client.write_event(Event(type="earshot.stats", data={"id": "1"}))
            reply = await asyncio.wait_for(client.read_event(), 30)
            print(json.dumps({"type": reply.type, "data": reply.data}))

    asyncio.run(main(sys.argv[1]))
    """

    @Test func homeAssistantStyleClientTranscribesOverTCPAndAdminEventsAreRefused() async throws {
        let port = try LoopbackPort.free()
        let daemon = try await SpeechDaemon.start(config: "[Wyoming]\nListen=tcp://127.0.0.1:\(port)\nAppID=home-assistant\n", modules: ["dictation"])
        do { try await transcribeAndProbe(daemon, port: port) } catch { await daemon.cleanUp(); throw error }
        await daemon.cleanUp()
    }

    private func transcribeAndProbe(_ daemon: TestDaemon, port: UInt16) async throws {
        let uri = "tcp://127.0.0.1:\(port)"
        let script = try daemon.directory.write("wyoming-client.py", SpeechWyomingTests.client)
        let run = try await ChildProcess.run("/usr/bin/env", ["python3", script, uri, SpeechFixtures.path(SpeechFixtures.ids[0])], in: daemon.directory, timeout: .seconds(120))
        try #require(run.status == 0, "the wyoming TCP client failed: \(run.stderr)")
        let output = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], "\(run.stdout)")
        #expect((output["describe"] as? [String: Any])?["type"] as? String == "info")
        let transcript = try #require(output["transcript"] as? String, "\(output)")
        print("[wyoming tcp] \(transcript)")
        #expect(SpeechFixtures.wer([(try SpeechFixtures.reference(SpeechFixtures.ids[0]), transcript)]) < 0.5, "\(transcript)")

        let probe = try daemon.directory.write("probe.py", Self.adminProbe)
        let refused = try await ChildProcess.run("/usr/bin/env", ["python3", probe, uri], in: daemon.directory)
        try #require(refused.status == 0, "\(refused.stderr)")
        let reply = try #require(try JSONSerialization.jsonObject(with: Data(refused.stdout.utf8)) as? [String: Any])
        #expect(reply["type"] as? String == "error")
        #expect((reply["data"] as? [String: Any])?["code"] as? String == "permissionDenied", "\(reply)")
    }

    @Test func nothingListensOnTCPByDefault() async throws {
        let daemon = try await SpeechDaemon.start(modules: [])
        let pid = daemon.child.pid
        // The daemon holds no TCP listening socket at all.
        let sockets = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []).compactMap {
            try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)")
        }.filter { $0.hasPrefix("socket:[") }.map { String($0.dropFirst(8).dropLast()) }
        let tcp = ((try? String(contentsOfFile: "/proc/\(pid)/net/tcp", encoding: .utf8)) ?? "")
            + ((try? String(contentsOfFile: "/proc/\(pid)/net/tcp6", encoding: .utf8)) ?? "")
        await daemon.cleanUp()
        let listeningInodes = tcp.split(separator: "\n").dropFirst().compactMap { line -> String? in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            return fields.count > 9 && fields[3] == "0A" ? String(fields[9]) : nil
        }
        #expect(!sockets.isEmpty, "the daemon has its Unix sockets")
        #expect(Set(sockets).isDisjoint(with: listeningInodes), "a TCP listener is open by default")
    }
}
