import EarshotWire
import Foundation
import Testing
import TestSupport

/// Admission limits against the real daemon: `MaxConcurrentAnalyses`, `ignoresResourceLimits` up to
/// `MaxConcurrentAnalysesHard`, with no queue (`MaxQueued=0`).
@Suite(.serialized, .speechDaemon(config: "[Analysis]\nMaxConcurrentAnalyses=1\nMaxConcurrentAnalysesHard=2\nMaxQueued=0\n", modules: ["dictation"]))
struct SpeechLimitsTests {
    @Test func analysesBeyondTheLimitAreRefusedAtOnce() async throws {
        let daemon = try SpeechDaemon.shared()
        let a = try TestConnection(daemon.socket), b = try TestConnection(daemon.socket), c = try TestConnection(daemon.socket)
        defer { a.close(); b.close(); c.close() }
        let module = SpeechFixtures.dictation()
        var first = try await WireSession.opened(a, [module])

        let began = ContinuousClock.now
        let refused = try await WireSession.open(b, [module])
        #expect(refused.error?.code == .insufficientResources, "\(String(describing: refused.error))")
        #expect(ContinuousClock.now - began < .seconds(1), "refusal must not wait for a slot")

        var second = try await WireSession.opened(b, [module], options: AnalysisOptions(ignoresResourceLimits: true))
        let beyondHard = try await WireSession.open(c, [module], options: AnalysisOptions(ignoresResourceLimits: true))
        #expect(beyondHard.error?.code == .insufficientResources, "the hard cap is 2: \(String(describing: beyondHard.error))")
        #expect(try await c.stats().sessions == 2)

        // A finished session frees its slot for the next open straight away.
        try await first.finish(.cancelNow)
        try await second.finish(.cancelNow)
        var third = try await WireSession.opened(c, [module])
        try await third.finish(.cancelNow)
        #expect(try await c.pollStats { $0.sessions == 0 }.sessions == 0)
    }
}

/// Issue 29 item 5: a busy daemon queues opens before it refuses (`MaxConcurrentAnalyses=1`,
/// `MaxQueued=1`): the waiting client is told its place, opens when a slot frees, and only an open
/// beyond the queue is refused.
@Suite(.serialized, .speechDaemon(config: "[Analysis]\nMaxConcurrentAnalyses=1\nMaxQueued=1\n", modules: ["dictation"]))
struct SpeechQueueTests {
    @Test func anOpenWaitsForAFreeSlotAndOnlyOneBeyondTheQueueIsRefused() async throws {
        let daemon = try SpeechDaemon.shared()
        let a = try TestConnection(daemon.socket), b = try TestConnection(daemon.socket), c = try TestConnection(daemon.socket)
        defer { a.close(); b.close(); c.close() }
        let module = SpeechFixtures.dictation()
        var first = try await WireSession.opened(a, [module])

        // b waits: told its place, no reply yet.
        try await b.send(AnalyzerOpen(id: "b1", modules: [module], options: AnalysisOptions()))
        let progress = try #require(try await b.next())
        #expect(progress.type == AnalyzerProgress.eventType && (try? progress.decode(AnalyzerProgress.self).position) == 1, "\(progress)")
        // c finds the queue full: refused at once.
        let began = ContinuousClock.now
        let refused = try await WireSession.open(c, [module])
        #expect(refused.error?.code == .insufficientResources && refused.error?.text.contains("waiting") == true, "\(String(describing: refused.error))")
        #expect(ContinuousClock.now - began < .seconds(1), "a refusal beyond the queue does not wait")

        // The slot frees: b opens.
        try await first.finish(.cancelNow)
        var second = try #require(try await WireSession.openReply(b, timeout: .seconds(20)).session)
        #expect(second.opened?.id == "b1")
        try await second.finish(.cancelNow)
        #expect(try await c.pollStats { $0.sessions == 0 }.sessions == 0)
    }

    /// A client that goes away while queued leaves the queue: an HTTP upload waiting for the slot
    /// gives up after a second (curl `-m 1`), and the next open takes its place in the queue
    /// instead of being refused.
    @Test func aClientThatGoesAwayWhileQueuedLeavesTheQueue() async throws {
        let daemon = try SpeechDaemon.shared()
        let a = try TestConnection(daemon.socket), b = try TestConnection(daemon.socket)
        defer { a.close(); b.close() }
        var held = try await WireSession.opened(a, [SpeechFixtures.dictation()])
        let http = (daemon.socket as NSString).deletingLastPathComponent + "/http.sock"
        let gone = try await ChildProcess.run("/usr/bin/curl", ["-sS", "-m", "1", "--unix-socket", http, "-F", "file=@\(SpeechFixtures.path(SpeechFixtures.ids[0]))",
                                                               "-F", "model=dictation", "http://earshot/v1/audio/transcriptions"], in: daemon.directory)
        #expect(gone.status == 28, "curl gave up waiting: \(gone)")
        // Its place is free again once the daemon has seen it go (the handler is cancelled).
        var place: Frame?
        for attempt in 0..<20 {
            try await b.send(AnalyzerOpen(id: "b\(attempt)", modules: [SpeechFixtures.dictation()], options: AnalysisOptions()))
            let frame = try await b.next()
            if frame?.type == AnalyzerProgress.eventType {
                place = frame
                break
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(place.map { (try? $0.decode(AnalyzerProgress.self).position) == 1 } == true, "\(String(describing: place))")
        try await held.finish(.cancelNow)
        var next = try #require(try await WireSession.openReply(b, timeout: .seconds(20)).session)
        try await next.finish(.cancelNow)
    }
}

/// The issue's `xargs -P8 earshot transcribe`: half its files failed with "too many analyses at
/// once"; with the default queue (`MaxQueued=16`) and two slots, all eight succeed.
@Suite(.serialized, .speechDaemon(config: "[Analysis]\nMaxConcurrentAnalyses=2\n", modules: ["dictation"]))
struct SpeechQueueCLITests {
    @Test func eightTranscriptionsAtOnceAllSucceed() async throws {
        let daemon = try SpeechDaemon.shared()
        let runs = try await withThrowingTaskGroup(of: (Int32, String, String).self) { group in
            for index in 0..<8 {
                group.addTask {
                    let file = SpeechFixtures.path(SpeechFixtures.ids[index % SpeechFixtures.ids.count])
                    return try await ChildProcess.run(BuiltProducts.path("earshot"), ["--socket", daemon.socket, "transcribe", "--module", "dictation", file],
                                                      in: daemon.directory, timeout: .seconds(120))
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(runs.allSatisfy { $0.0 == 0 && !$0.1.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty }, "\(runs)")
        #expect(runs.contains { $0.2.contains("waiting for a free analysis slot") }, "a queued client says so: \(runs.map(\.2))")
    }
}

/// One loaded Whisper model shared by concurrent sessions, and each retention policy, observed
/// through `earshot.stats` and `earshot.assets` (`LingerSeconds=1`).
@Suite(.serialized, .speechDaemon(config: "[Analysis]\nLingerSeconds=1\n", modules: ["transcriber"]),
       .enabled(if: SpeechFixtures.whisperAvailable, SpeechFixtures.whisperMissing))
struct SpeechModelSharingTests {
    static let clip = SpeechFixtures.ids[1]

    /// Sends the short clip and finishes; returns the final text.
    static func transcribe(_ opened: WireSession) async throws -> String {
        var session = opened
        try await session.send(try SpeechFixtures.samples(clip))
        try await session.finish()
        #expect(session.finished?.error == nil)
        return session.finalText()
    }

    @Test func twoClientsShareOneLoadedModelWhileInUse() async throws {
        let daemon = try SpeechDaemon.shared()
        let a = try TestConnection(daemon.socket), b = try TestConnection(daemon.socket), monitor = try TestConnection(daemon.socket)
        defer { a.close(); b.close(); monitor.close() }
        let loadsBefore = try await monitor.stats().modelLoads
        async let openA = WireSession.opened(a, [SpeechFixtures.transcriber()])
        async let openB = WireSession.opened(b, [SpeechFixtures.transcriber()])
        let (first, second) = try await (openA, openB)

        let stats = try await monitor.stats()
        #expect(stats.sessions == 2)
        #expect(stats.models.count == 1, "\(stats.models)")
        #expect(stats.models.first?.users == 2)
        #expect(stats.modelLoads == loadsBefore + 1, "two sessions opened at once must load the model once")
        let model = try #require(stats.models.first)
        print("[sharing] \(model.key): \(model.memoryBytes >> 20) MiB, users \(model.users), loads \(stats.modelLoads), daemon resident \(stats.residentBytes >> 20) MiB")
        #expect(model.memoryBytes > 1 << 20)

        async let textA = Self.transcribe(first)
        async let textB = Self.transcribe(second)
        for text in try await [textA, textB] {
            #expect(SpeechFixtures.words(text).contains("young"), "\(text)")
        }
        // whileInUse: unloaded once neither uses it.
        let after = try await monitor.pollStats { $0.models.isEmpty && $0.sessions == 0 }
        #expect(after.models.isEmpty, "\(after.models)")
        #expect(after.sessions == 0)
    }

    // Lingering and processLifetime retention are tested in process on the speech service's
    // clock (EarshotDaemonTests/AnalysisCoordinatorTests, issue 31), not here on the wall clock.

    /// A client process SIGKILLed mid-session: its session ends, its model and leases are released.
    @Test func clientKilledMidSessionReleasesEverything() async throws {
        let daemon = try SpeechDaemon.shared()
        let directory = try TempDirectory("eskill")
        defer { directory.remove() }
        let script = try directory.write("client.py", """
        import json, socket, sys, time, wave
        path, wav = sys.argv[1], sys.argv[2]
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        reader = sock.makefile("rb")
        def send(kind, data, payload=b""):
            block = json.dumps(data).encode()
            header = {"type": kind, "data_length": len(block)}
            if payload:
                header["payload_length"] = len(payload)
            sock.sendall(json.dumps(header).encode() + b"\\n" + block + payload)
        def read():
            header = json.loads(reader.readline())
            data = dict(header.get("data") or {})
            data.update(json.loads(reader.read(header.get("data_length") or 0) or b"{}"))
            reader.read(header.get("payload_length") or 0)
            return header["type"], data
        send("earshot.analyzer.open", {"id": "1", "modules": [{"kind": "transcriber", "locale": "en-US"}]})
        kind, data = read()
        assert kind == "earshot.analyzer.open.result", (kind, data)
        with wave.open(wav, "rb") as w:
            pcm = w.readframes(w.getnframes())
        # Half the utterance: the session is mid-speech when the process dies.
        for i in range(0, len(pcm) // 2, 6400):
            send("earshot.analyzer.audio", {"session": data["session"], "rate": 16000, "width": 2, "channels": 1}, pcm[i:i + 6400])
        print("sent", data["session"], flush=True)
        time.sleep(600)
        """)
        let child = try ChildProcess("/usr/bin/env", ["python3", script, daemon.socket, SpeechFixtures.path(SpeechFixtures.ids[0])], in: directory, name: "client")
        defer { Task { await child.stop() } }
        let deadline = ContinuousClock.now + .seconds(20)
        while !child.stdout.contains("sent"), child.process.isRunning, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        try #require(child.stdout.contains("sent"), "the python client did not get a session: \(child.stderr)")

        let monitor = try TestConnection(daemon.socket)
        defer { monitor.close() }
        let busy = try await monitor.stats()
        #expect(busy.sessions == 1)
        #expect(busy.models.first?.users == 1)
        let leased = try await monitor.assets().assets.filter(\.leased).map(\.id).sorted()
        #expect(leased == ["silero-vad", "whisper-base"], "leases while the session runs: \(leased)")

        child.signal(SIGKILL)
        #expect(await child.wait(timeout: .seconds(5)) != nil)
        let after = try await monitor.pollStats { $0.sessions == 0 && $0.models.isEmpty }
        #expect(after.sessions == 0)
        #expect(after.models.isEmpty, "whileInUse model of the dead client: \(after.models)")
        let deadlineLeases = ContinuousClock.now + .seconds(10)
        var stillLeased = try await monitor.assets().assets.filter(\.leased).map(\.id)
        while !stillLeased.isEmpty, ContinuousClock.now < deadlineLeases {
            try await Task.sleep(for: .milliseconds(50))
            stillLeased = try await monitor.assets().assets.filter(\.leased).map(\.id)
        }
        #expect(stillLeased.isEmpty, "leases left behind: \(stillLeased)")
    }
}
