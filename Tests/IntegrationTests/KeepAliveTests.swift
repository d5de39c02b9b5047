import EarshotCommandLine
import EarshotWire
import Foundation
import Testing
import TestSupport

/// Warm by default (issue 10): `earshot transcribe` keeps its model lingering, `--keep-alive`
/// overrides that per call within the daemon's `MaxKeepAliveSec`, and a transcription of an
/// installed model takes one connection, one hello and one status query before its audio.
/// Observed through `earshot.stats` (`model_loads`) and the daemon's debug log.
@Suite(.serialized, .speechDaemon(config: "[Daemon]\nLogLevel=debug\n[Analysis]\nMaxKeepAliveSec=60\n", modules: ["transcriber", "dictation"]),
       .enabled(if: SpeechFixtures.whisperAvailable, SpeechFixtures.whisperMissing))
struct KeepAliveTests {
    static let clip = SpeechFixtures.path(SpeechFixtures.ids[1])

    /// Runs `earshot transcribe --module transcriber … clip`; returns the child (for its pid) and status.
    static func transcribe(_ options: [String] = []) async throws -> (child: ChildProcess, status: Int32) {
        let daemon = try SpeechDaemon.shared()
        let child = try ChildProcess(BuiltProducts.path("earshot"), ["--socket", daemon.socket, "transcribe", "--module", "transcriber"] + options + [clip],
                                     in: daemon.directory)
        let status = try #require(await child.wait(timeout: .seconds(120)), "earshot did not finish")
        return (child, status)
    }

    @Test func repeatedCommandLineCallsLoadTheModelOnceAndKeepAliveZeroUnloadsIt() async throws {
        let monitor = try TestConnection(SpeechDaemon.shared().socket)
        defer { monitor.close() }
        let before = try await monitor.stats().modelLoads
        for _ in 0..<4 {
            let run = try await Self.transcribe()
            #expect(run.status == 0, "\(run.child.stderr)")
            #expect(SpeechFixtures.words(run.child.stdout).contains("young"), "\(run.child.stdout)")
        }
        let warm = try await monitor.stats()
        #expect(warm.modelLoads == before + 1, "four calls within LingerSeconds load the model once")
        #expect(warm.models.count == 1 && warm.models.first?.users == 0, "the model lingers unused: \(warm.models)")

        // --keep-alive 0: this call reuses the warm model, then it goes.
        let last = try await Self.transcribe(["--keep-alive", "0"])
        #expect(last.status == 0, "\(last.child.stderr)")
        let cold = try await monitor.pollStats { $0.models.isEmpty }
        #expect(cold.models.isEmpty, "\(cold.models)")
        #expect(cold.modelLoads == before + 1)
    }

    /// A finished session's voice activity detector serves the next session while a model stays
    /// loaded, and goes with the last model (issue 10: loading a new detector cost ~50 ms of every
    /// `earshot transcribe`). Without reuse, each call would leave one more spare.
    @Test func callsInARowShareOneSpareDetectorThatGoesWithTheModel() async throws {
        let monitor = try TestConnection(SpeechDaemon.shared().socket)
        defer { monitor.close() }
        func detectors(when done: (StatsReply) -> Bool) async throws -> Int? {
            try await monitor.pollStats { $0.sessions == 0 && done($0) }.liveObjects?["SileroDetector"]
        }
        let unload = try await Self.transcribe(["--keep-alive", "0"])
        #expect(unload.status == 0, "\(unload.child.stderr)")
        #expect(try await detectors { $0.models.isEmpty && $0.liveObjects?["SileroDetector"] == 0 } == 0, "no model, no spare detector")
        for _ in 0..<3 {
            let run = try await Self.transcribe()
            #expect(run.status == 0, "\(run.child.stderr)")
        }
        #expect(try await detectors { !$0.models.isEmpty } == 1, "three calls in a row use one detector")
        let last = try await Self.transcribe(["--keep-alive", "0"])
        #expect(last.status == 0, "\(last.child.stderr)")
        #expect(try await detectors { $0.models.isEmpty && $0.liveObjects?["SileroDetector"] == 0 } == 0, "the spare went with the model")
    }

    /// Regression: a session whose client went away mid-stream (Ctrl-C of `earshot listen`, a
    /// Wyoming client that hangs up) destroyed its detector, so the next open built a new one
    /// (~120 ms of ONNX Runtime graph building while the client waited). It now goes back to the
    /// spares once the session's queued work is done.
    @Test func anAbandonedSessionGivesItsDetectorBack() async throws {
        let monitor = try TestConnection(SpeechDaemon.shared().socket)
        defer { monitor.close() }
        let warm = try await Self.transcribe()
        #expect(warm.status == 0, "\(warm.child.stderr)")
        #expect(try await monitor.pollStats { $0.sessions == 0 && $0.spareDetectors == 1 }.spareDetectors == 1, "a finished call leaves one spare")

        let client = try TestConnection(SpeechDaemon.shared().socket)
        let session = try await WireSession.opened(client, [SpeechFixtures.transcriber()], options: AnalysisOptions(modelRetention: .lingering))
        try await session.send(try SpeechFixtures.samples(SpeechFixtures.ids[1]).prefix(16000))
        #expect(try await monitor.stats().spareDetectors == 0, "the session took the spare")
        client.close()
        let after = try await monitor.pollStats { $0.sessions == 0 && $0.spareDetectors == 1 }
        #expect(after.spareDetectors == 1 && after.liveObjects?["SileroDetector"] == 1, "\(after.liveObjects ?? [:]), spares \(String(describing: after.spareDetectors))")
    }

    @Test func aKeepAliveAboveTheCapIsClampedAndTheCommandSaysSo() async throws {
        let monitor = try TestConnection(SpeechDaemon.shared().socket)
        defer { monitor.close() }
        let run = try await Self.transcribe(["--keep-alive", "2h"])
        #expect(run.status == 0, "\(run.child.stderr)")
        #expect(run.child.stderr.contains("clamped to 60.0 seconds"), "\(run.child.stderr)")
        // The admin's log says so too (written before the reply; read through a pipe).
        let logged = "keep-alive 7200.0 s cut to MaxKeepAliveSec 60.0 s"
        for _ in 0..<100 where try !SpeechDaemon.shared().child.stderr.contains(logged) { try await Task.sleep(for: .milliseconds(20)) }
        #expect(try SpeechDaemon.shared().child.stderr.contains(logged))

        // On the wire: the reply carries what was granted and says it was cut.
        var session = try await WireSession.opened(monitor, [SpeechFixtures.transcriber()], options: AnalysisOptions(modelRetention: .lingering, keepAliveSeconds: 7200))
        #expect(session.opened?.keepAliveSeconds == 60 && session.opened?.keepAliveClamped == true, "\(String(describing: session.opened))")
        try await session.finish(.cancelNow)
        var within = try await WireSession.opened(monitor, [SpeechFixtures.transcriber()], options: AnalysisOptions(modelRetention: .lingering, keepAliveSeconds: 0))
        #expect(within.opened?.keepAliveSeconds == 0 && within.opened?.keepAliveClamped == false)
        try await within.finish(.cancelNow)
        #expect(try await monitor.pollStats { $0.models.isEmpty }.models.isEmpty, "keep-alive 0 let it go")

        // Dictation (PocketSphinx) loads per session: the keep-alive is reported as having no effect.
        let daemon = try SpeechDaemon.shared()
        let dictation = try await ChildProcess.run(BuiltProducts.path("earshot"), ["--socket", daemon.socket, "transcribe", "--module", "dictation", "--keep-alive", "5m", Self.clip],
                                                   in: daemon.directory, timeout: .seconds(120))
        #expect(dictation.status == 0, "\(dictation.stderr)")
        #expect(dictation.stderr.contains("--keep-alive has no effect: the dictation model is not shared between calls"), "\(dictation.stderr)")
    }

    @Test func unusableKeepAlivesAreTypedErrors() async throws {
        for value in ["-5s", "soon", "1e3", "5d"] {
            let run = try await Self.transcribe(["--keep-alive", value])
            #expect(run.status == 64, "a usage error")
            #expect(run.child.stderr.contains("--keep-alive needs a duration such as 0, 30s, 5m or 1h, not '\(value)'"), "\(run.child.stderr)")
        }
        // Only transcribe keeps a model: elsewhere the option is refused, not ignored.
        let status = try await ChildProcess.run(BuiltProducts.path("earshot"), ["--socket", try SpeechDaemon.shared().socket, "status", "--keep-alive", "5m"],
                                                in: try SpeechDaemon.shared().directory)
        #expect(status.status == 64 && status.stderr.contains("'status' does not take --keep-alive"), "\(status.stderr)")
        let connection = try TestConnection(SpeechDaemon.shared().socket)
        defer { connection.close() }
        let hostile: [JSONValue] = [.int(-1), .double(-0.5), .string("forever"), .bool(true)]
        for value in hostile {
            var open = try Frame(AnalyzerOpen(modules: [SpeechFixtures.transcriber()], options: AnalysisOptions(modelRetention: .lingering)))
            open.data["options"] = .object(["model_retention": .string("lingering"), "keep_alive_seconds": value])
            open.data["id"] = .string("hostile")
            try await connection.channel.send(open)
            let reply = try #require(try await connection.next())
            #expect(reply.type == ErrorEvent.eventType && (try? reply.decode(ErrorEvent.self).code) == .badRequest, "\(value): \(reply)")
        }
        // A keep-alive means lingering: with another retention it cannot be honoured.
        let mismatched = try await WireSession.open(connection, [SpeechFixtures.transcriber()], options: AnalysisOptions(modelRetention: .whileInUse, keepAliveSeconds: 30))
        #expect(mismatched.error?.code == .badRequest, "\(String(describing: mismatched.error))")
        #expect(mismatched.error?.text.contains("needs model_retention lingering") == true)
    }

    /// Wyoming sessions linger too: a second transcription (a new connection, as Home Assistant
    /// makes per utterance) finds the model loaded.
    @Test func wyomingTranscriptionsLoadTheModelOnce() async throws {
        let daemon = try SpeechDaemon.shared()
        let monitor = try TestConnection(daemon.socket)
        defer { monitor.close() }
        _ = try await monitor.reply(to: EndRetentionRequest())
        let before = try await monitor.pollStats { $0.models.isEmpty }
        #expect(before.models.isEmpty, "earlier tests' models were let go: \(before.models)")
        let script = try daemon.directory.write("wyoming-client.py", SpeechWyomingTests.client)
        for _ in 0..<2 {
            let run = try await ChildProcess.run("/usr/bin/env", ["python3", script, daemon.socket, Self.clip], in: daemon.directory, timeout: .seconds(120))
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stdout.lowercased().contains("young"), "\(run.stdout)")
        }
        let warm = try await monitor.stats()
        #expect(warm.modelLoads == before.modelLoads + 1, "two Wyoming transcriptions load the model once")
        #expect(warm.models.count == 1 && warm.models.first?.users == 0, "it lingers: \(warm.models)")
        _ = try await monitor.reply(to: EndRetentionRequest())
    }

    /// Issue 10 item 4: it used to take two connections, two hellos and four status queries (and an
    /// install request) before the first audio frame.
    @Test func transcribeOfAnInstalledModelTakesOneConnectionOneHelloAndOneStatusQuery() async throws {
        let run = try await Self.transcribe(["--keep-alive", "0"])
        #expect(run.status == 0, "\(run.child.stderr)")
        let connections = try await SpeechDaemon.shared().framesReceived(fromPID: run.child.pid)
        #expect(connections.count == 1, "one connection: \(connections)")
        let counts = try #require(connections.first)
        #expect(counts["earshot.hello"] == 1 && counts["earshot.module-status"] == 1 && counts["earshot.analyzer.open"] == 1, "\(counts)")
        #expect(counts["earshot.install"] == nil, "nothing to install: \(counts)")
        // Besides audio, only the finish: nothing else is asked before the audio.
        #expect(Set(counts.keys).subtracting(["earshot.hello", "earshot.module-status", "earshot.analyzer.open", "earshot.analyzer.audio", "earshot.analyzer.control"]).isEmpty, "\(counts)")
    }
}

/// `--keep-alive` parsing and the wire option's validation, without a daemon.
@Suite struct KeepAliveOptionTests {
    @Test func durationsParseWithTheirUnits() throws {
        let cases: [(String, Duration)] = [("0", .zero), ("30", .seconds(30)), ("30s", .seconds(30)), ("250ms", .milliseconds(250)),
                                           ("1.5m", .seconds(90)), ("2h", .seconds(7200))]
        for (text, expected) in cases {
            #expect(try Arguments(["--keep-alive", text], valued: ["keep-alive"]).duration("keep-alive") == expected, "\(text)")
        }
        #expect(try Arguments([], valued: ["keep-alive"]).duration("keep-alive") == nil)
        for text in ["-1s", "", "s", "5d", "1e3", "inf", "nan", "1,5s", "99999999999h"] {
            #expect(throws: Arguments.ParseError.self, "\(text)") { try Arguments(["--keep-alive", text], valued: ["keep-alive"]).duration("keep-alive") }
        }
    }

    @Test func theWireOptionIsValidatedWhenDecoded() throws {
        func decode(_ options: [String: JSONValue]) throws -> AnalysisOptions {
            var frame = try Frame(AnalyzerOpen(modules: []))
            frame.data["options"] = .object(options)
            return try frame.decode(AnalyzerOpen.self).options
        }
        #expect(try decode(["model_retention": .string("lingering"), "keep_alive_seconds": .int(30)]).keepAliveSeconds == 30)
        #expect(try decode(["model_retention": .string("lingering")]).keepAliveSeconds == nil)
        for value: JSONValue in [.int(-1), .double(-0.001), .string("30s"), .bool(false)] {
            #expect(throws: EventDecodingError.self, "\(value)") { try decode(["model_retention": .string("lingering"), "keep_alive_seconds": value]) }
        }
        let error = #expect(throws: EventDecodingError.self) { try decode(["model_retention": .string("processLifetime"), "keep_alive_seconds": .int(5)]) }
        #expect(error?.description.contains("needs model_retention lingering") == true, "\(String(describing: error))")
        // Encoded only when set, so older daemons see the options they know.
        #expect(try Frame(AnalyzerOpen(modules: [])).data["options"]?.objectValue?["keep_alive_seconds"] == nil)
    }
}
