import EarshotWire
import Foundation
import Testing
import TestSupport

/// Issue 27: 40 slow uploads by one local user locked every user out of the HTTP front (one thread
/// per connection, 32 of them, the rest in the listen backlog), and one network host could hold
/// every Wyoming-over-TCP slot. Now connections are admitted per uid and per address before any
/// thread is spent, slow uploads are cut by the body-rate rule, an unauthenticated TCP peer costs
/// its headers, and a second Wyoming host is served while the first holds its share.
@Suite(.serialized)
struct FrontLockOutTests {
    static let key = "es-lockout-key-0123456789abcdef"

    /// argv: target (a socket path, or HOST:PORT), count, seconds, [source address]. Opens `count`
    /// connections, sends each the headers of a 1 MB upload of `POST /v1/audio/transcriptions`,
    /// then trickles one body byte a connection every 0.5 s for `seconds`; prints `holding` once
    /// all are open, then one JSON line: per connection what the server did (`status` of an answer,
    /// `cut` when it closed the connection without one, `open` when it still holds it at the end).
    static let trickler = #"""
        import json, socket, sys, time
        target, count, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
        def connect():
            if ":" in target:
                host, port = target.rsplit(":", 1)
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                if len(sys.argv) > 4:
                    s.bind((sys.argv[4], 0))
                s.connect((host, int(port)))
            else:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(target)
            s.setblocking(False)
            return s
        head = (b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: earshot\r\n"
                b"Content-Type: multipart/form-data; boundary=xyz\r\nContent-Length: 1000000\r\n\r\n")
        conns, outcome = [], []
        for _ in range(count):
            s = connect()
            try:
                s.send(head)
            except OSError:
                pass
            conns.append(s)
            outcome.append(None)
        print("holding", flush=True)
        def look(i):
            try:
                data = conns[i].recv(4096)
            except BlockingIOError:
                return
            except OSError:
                outcome[i] = "cut"
                return
            if not data:
                outcome[i] = "cut"
            elif data.startswith(b"HTTP/1.1 "):
                outcome[i] = int(data.split(b" ")[1])
        end = time.time() + seconds
        while time.time() < end and any(o is None for o in outcome):
            for i in range(count):
                if outcome[i] is None:
                    look(i)
                if outcome[i] is None:
                    try:
                        conns[i].send(b"x")
                    except OSError:
                        outcome[i] = "cut"
            time.sleep(0.5)
        for i in range(count):
            if outcome[i] is None:
                look(i)
        print(json.dumps([o if o is not None else "open" for o in outcome]), flush=True)
        """#

    /// The trickler's outcome, counted: `429: 32, cut: 8`.
    static func tally(_ line: Substring) throws -> [String: Int] {
        let outcomes = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [Any])
        return outcomes.reduce(into: [:]) { counts, outcome in counts["\(outcome)", default: 0] += 1 }
    }

    static func curl(_ daemon: TestDaemon, as uid: UInt32?, _ arguments: [String]) async throws -> (status: Int, body: String) {
        let curl = ["-sS", "-m", "20", "-w", "\n%{http_code}"] + arguments
        let run = if let uid {
            try await OtherUser.run(as: uid, "/usr/bin/curl", curl, in: daemon.directory, timeout: .seconds(30))
        } else {
            try await ChildProcess.run("/usr/bin/curl", curl, in: daemon.directory, timeout: .seconds(30))
        }
        var lines = run.stdout.components(separatedBy: "\n")
        return (Int(lines.removeLast()) ?? 0, lines.joined(separator: "\n") + run.stderr)
    }

    static func metric(_ daemon: TestDaemon, _ line: String) async throws -> Bool {
        let scrape = try await curl(daemon, as: nil, ["--unix-socket", PrometheusScrape.socket(of: daemon), "http://earshot/metrics"])
        return scrape.body.split(separator: "\n").contains { $0.hasPrefix(line) }
    }

    /// Runs `body`, then stops `daemon` (also when `body` throws).
    static func using(_ daemon: TestDaemon, _ body: () async throws -> Void) async throws {
        do { try await body() } catch {
            await daemon.cleanUp()
            throw error
        }
        await daemon.cleanUp()
    }

    static let fastCuts = "[HTTP]\nUploadRateWindowSec=2\nMinUploadBytesPerSec=1000\nHeaderTimeoutSec=3\n"

    @Test func slowUploadsOfOneUserNoLongerLockEveryUserOutOfTheHTTPFront() async throws {
        let daemon = try await SpeechDaemon.start(config: "[Daemon]\nSocketMode=0666\n" + Self.fastCuts, modules: ["dictation"])
        try await Self.using(daemon) {
            for directory in [daemon.directory.path, (daemon.socket as NSString).deletingLastPathComponent] { chmod(directory, 0o755) }
            let socket = PrometheusScrape.socket(of: daemon)
            let script = try daemon.directory.write("trickler.py", Self.trickler)
            // uid nobody holds 40 slow uploads on http.sock for up to 12 s.
            let attacker = try OtherUser.start(as: OtherUser.nobody, "/usr/bin/python3", [script, socket, "40", "12"], in: daemon.directory, name: "trickler")
            _ = try await OtherUser.waitForLine(attacker, "holding")

            // Another uid is served meanwhile: the model list and a short transcription.
            let models = try await Self.curl(daemon, as: OtherUser.stranger, ["--unix-socket", socket, "http://earshot/v1/models"])
            #expect(models.status == 200, "\(models)")
            let transcription = try await Self.curl(daemon, as: OtherUser.stranger, ["--unix-socket", socket, "-F", "file=@\(SpeechFixtures.path(SpeechFixtures.ids[0]))",
                                                                                    "-F", "model=dictation", "-F", "response_format=text", "http://earshot/v1/audio/transcriptions"])
            #expect(transcription.status == 200 && !transcription.body.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "\(transcription)")

            let summary = try await OtherUser.waitForLine(attacker, "[", timeout: .seconds(30))
            let counts = try Self.tally(summary[...])
            // Eight connections (MaxConnectionsPerPeer) were admitted and cut for their body rate; the
            // other 32 were refused at once with 429.
            #expect(counts == ["429": 32, "cut": 8], "\(summary)")
            #expect(try await Self.metric(daemon, "earshot_http_slow_clients_total{rule=\"body_rate\"} 8"))
            #expect(try await Self.metric(daemon, "earshot_http_requests_total{route=\"connection\",status=\"429\"} 32"))
            let refusal = try await Self.curl(daemon, as: nil, ["--unix-socket", socket, "http://earshot/v1/models"])
            #expect(refusal.status == 200, "the front is free again: \(refusal)")
            // Logged once per burst, not once per connection.
            let log = daemon.child.stderr
            #expect(log.components(separatedBy: "refused uid 65534 on the HTTP socket").count - 1 == 1, "\(log)")
        }
    }

    @Test func unauthenticatedTCPPeersCostTheirHeadersAndAnotherAddressIsServed() async throws {
        let port = try LoopbackPort.free()
        let keys = try TempDirectory("eskeys")
        defer { keys.remove() }
        let keyFile = try keys.write("http-keys", "\(Self.key) lockout-test\n")
        let daemon = try await TestDaemon(config: "[HTTP]\nListen=127.0.0.1:\(port)\nKeyFile=\(keyFile)\nUploadRateWindowSec=2\nMinUploadBytesPerSec=1000\n")
        try await Self.using(daemon) {
            let script = try daemon.directory.write("trickler.py", Self.trickler)
            let attacker = try ChildProcess("/usr/bin/python3", [script, "127.0.0.1:\(port)", "40", "6"], in: daemon.directory, name: "tcp-trickler")
            _ = try await OtherUser.waitForLine(attacker, "holding")
            // A keyed client from another address.
            let other = try await Self.curl(daemon, as: nil, ["--interface", "127.0.0.2", "-H", "Authorization: Bearer \(Self.key)", "http://127.0.0.1:\(port)/v1/models"])
            #expect(other.status == 200, "\(other)")
            let summary = try await OtherUser.waitForLine(attacker, "[", timeout: .seconds(30))
            let counts = try Self.tally(summary[...])
            // Without a key, every admitted peer is answered 401 when its headers end (its body is
            // never read); the rest were over the address's share: nothing is held.
            #expect(counts["open"] == nil && counts["cut"] == nil, "\(summary)")
            #expect((counts["401"] ?? 0) >= 8 && (counts["401"] ?? 0) + (counts["429"] ?? 0) == 40, "\(summary)")
        }
    }

    /// argv: HOST:PORT, count, source address. Opens `count` Wyoming connections from the source
    /// address, each with half a frame header; prints `holding` and one JSON line per connection
    /// the daemon answered at once (its refusal), then keeps the rest open until killed.
    static let wyomingHolder = #"""
        import json, socket, sys, time
        host, port = sys.argv[1].rsplit(":", 1)
        held = []
        for _ in range(int(sys.argv[2])):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((sys.argv[3], 0))
            s.connect((host, int(port)))
            s.send(b'{"type": "transcri')
            held.append(s)
        time.sleep(0.5)
        refused = 0
        for s in held:
            s.setblocking(False)
            try:
                if s.recv(4096):
                    refused += 1
            except BlockingIOError:
                pass
        print("holding", refused, flush=True)
        time.sleep(60)
        """#

    /// argv: HOST:PORT, source address. Sends `describe`; prints the reply's type.
    static let describe = #"""
        import json, socket, sys
        host, port = sys.argv[1].rsplit(":", 1)
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((sys.argv[2], 0))
        s.settimeout(10)
        s.connect((host, int(port)))
        s.sendall(b'{"type": "describe"}\n')
        print(json.loads(s.makefile().readline())["type"])
        """#

    @Test func oneHostHoldingWyomingConnectionsLeavesAnotherHostServed() async throws {
        let port = try LoopbackPort.free()
        let daemon = try await TestDaemon(config: "[Wyoming]\nListen=tcp://127.0.0.1:\(port)\n[Limits]\nHandshakeTimeoutSec=60\n")
        try await Self.using(daemon) {
            let holder = try daemon.directory.write("holder.py", Self.wyomingHolder)
            let first = try ChildProcess("/usr/bin/python3", [holder, "127.0.0.1:\(port)", "12", "127.0.0.1"], in: daemon.directory, name: "wyoming-holder")
            let line = try await OtherUser.waitForLine(first, "holding")
            #expect(line == "holding 4", "8 connections per address (MaxConnectionsPerAddress) are held, the other 4 refused: \(line)")
            let describe = try daemon.directory.write("describe.py", Self.describe)
            let second = try await ChildProcess.run("/usr/bin/python3", [describe, "127.0.0.1:\(port)", "127.0.0.2"], in: daemon.directory)
            #expect(second.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "info", "\(second)")
            // The first host's own next connection is still refused.
            let again = try await ChildProcess.run("/usr/bin/python3", [describe, "127.0.0.1:\(port)", "127.0.0.1"], in: daemon.directory)
            #expect(again.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "error", "\(again)")
            await first.stop()
        }
    }
}
