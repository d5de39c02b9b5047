import EarshotAssets
@testable import EarshotDaemon
import EarshotSpeech
import EarshotSystem
import EarshotWire
import Foundation
import Testing
import TestSupport

/// Issue 31: the daemon's request path in process — the connection server, the route table, the
/// harnesses, the Wyoming adapter and the coordinator, served over socket pairs with the
/// stand-in Whisper model and a manual clock; no daemon binary, no listening socket.
final class DaemonCore: Sendable {
    let clock = ManualClock()
    let coordinator: AnalysisCoordinator
    let server: ConnectionServer
    private let accepted: AsyncStream<AcceptedConnection>.Continuation
    private let serving: Task<Void, Never>
    let directory: TempDirectory
    let config: DaemonConfig
    let paths: DaemonPaths
    let harness: DaemonHarness
    let metrics: DaemonMetrics
    let refusals: RefusalLog

    /// `config`: the daemon's config file (its `[Limits]` time the connections, as in earshotd).
    init(config text: String = "") async throws {
        directory = try TempDirectory("escore")
        directory.removeAtExit()
        var config = DaemonConfig()
        config.parse(text, source: "test.conf")
        self.config = config
        #expect(config.warnings.isEmpty && config.errors.isEmpty, "\(config.warnings) \(config.errors)")
        let paths = DaemonPaths.resolve(mode: .user, socketFlag: directory.file("earshot.sock"), stateFlag: directory.file("state"),
                                        cacheFlag: directory.file("cache"), config: config, environment: [:])
        self.paths = paths
        let limits = DaemonLimits(frame: config.frameLimits, maxConnections: 16)
        let registry = ConnectionRegistry(limits: ConnectionLimits(maxConnections: 16, maxPerUser: 8, adminReserved: 2, maxPerAddress: 4))
        let logger = Logger(minimum: .error)
        let metrics = DaemonMetrics()
        self.metrics = metrics
        let errors = ErrorMap(logger: logger, metrics: metrics)
        coordinator = try await CoreFixture.shared.coordinator()
        let facts = DaemonFacts(config: config, paths: paths, socketPath: paths.socket, socketActivated: false, started: .now, limits: limits)
        let assets = try await CoreFixture.shared.assetService()
        let speech = await coordinator.speech
        harness = DaemonHarness(facts: facts, registry: registry, assets: AssetHarness(assets: assets),
                                    speech: SpeechHarness(speech: speech, coordinator: coordinator, errors: errors, logger: logger), errors: errors)
        refusals = RefusalLog(logger: logger, clock: clock)
        server = ConnectionServer(harness: harness, registry: registry, logger: logger,
                                  channelOptions: config.channelOptions,
                                  refusals: refusals, clock: clock)
        let (stream, continuation) = AsyncStream.makeStream(of: AcceptedConnection.self)
        accepted = continuation
        let server = server, coordinator = coordinator
        serving = Task {
            async let released: Void = coordinator.run()
            await server.serve(stream)
            await coordinator.beginShutdown()
            await released
        }
    }

    /// A client connected as `uid` (an admin when `admin`).
    func connect(uid: UInt32 = 1000, admin: Bool = false) throws -> TestConnection {
        var fds: [Int32] = [0, 0]
        try systemCall("socketpair") { socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) }
        try UnixSocket.prepareInherited(fds[0])
        accepted.yield(AcceptedConnection(fd: fds[0], peer: PeerCredentials(pid: getpid(), uid: uid, gid: uid), admin: admin))
        return try TestConnection(fd: fds[1])
    }

    /// The HTTP front on its Unix socket (`http.sock` in ``directory``), as earshotd opens it.
    func openHTTP() async throws -> [HTTPListener] {
        try await Daemon(options: DaemonOptions()).openHTTP(config, paths: paths, mainSocket: paths.socket, harness: harness,
                                                          admins: AdminPolicy(group: "", daemonUID: getuid()), metrics: metrics, refusals: refusals, clock: clock)
    }

    /// Stops serving once every client has gone.
    func stop() async {
        accepted.finish()
        await serving.value
        directory.remove()
    }
}

@Suite(.serialized, .enabled(if: EmbeddedModels.runs(FileManager.default.fileExists(atPath: EmbeddedModels.catalog)), "needs the embedded catalog (Scripts/setup.sh)"))
struct DaemonCoreTests {
    @Test func aWyomingClientGetsItsTranscriptThroughTheWholeRequestPath() async throws {
        let core = try await DaemonCore()
        let client = try core.connect()
        let format = AudioFormatFields(rate: 16000, width: 2, channels: 1)
        try await client.send(Transcribe(language: "en-US"))
        try await client.send(AudioStart(format: format))
        let pcm = try AnalysisCoordinatorTests.pcm()
        for start in stride(from: 0, to: pcm.count, by: 32000) {
            try await client.send(AudioChunk(format: format), payload: Array(pcm[start..<min(start + 32000, pcm.count)]))
        }
        try await client.send(AudioStop())
        var frames: [Frame] = []
        while let frame = try await client.next(), frame.type != TranscriptStop.eventType { frames.append(frame) }
        let transcript = try #require(try frames.first { $0.type == Transcript.eventType }?.decode(Transcript.self), "\(frames.map(\.type))")
        #expect(transcript.text.hasPrefix("w0"), "the stand-in model's words: \(transcript.text)")
        #expect(frames.first?.type == TranscriptStart.eventType)
        client.close()
        await core.stop()
        #expect(core.coordinator.sessions.isEmpty, "the session was released")
    }

    @Test func anAdminRouteRefusesAnotherUserAndAnswersAnAdmin() async throws {
        let core = try await DaemonCore()
        let user = try core.connect(uid: 1000)
        let refused = try #require(try await user.roundTrip(GCRequest(id: "gc", dryRun: true)))
        #expect(refused.type == ErrorEvent.eventType)
        #expect(try refused.decode(ErrorEvent.self).code == .permissionDenied)
        let admin = try core.connect(uid: 0, admin: true)
        let answered = try #require(try await admin.roundTrip(GCRequest(id: "gc", dryRun: true)))
        #expect(answered.type == GCReply.eventType)
        user.close()
        admin.close()
        await core.stop()
    }

    @Test func malformedInputGetsAnErrorAndTheConnectionCloses() async throws {
        let core = try await DaemonCore()
        let client = try core.connect()
        try client.sendRaw(Array("{\"type\": 5}\n".utf8))
        let error = try #require(try await client.next())
        #expect(try error.decode(ErrorEvent.self).code == .malformedFrame)
        #expect(try await client.next() == nil, "closed after the error")
        await core.stop()
    }

    /// Issue 8's connection timeouts, on the daemon's clock (issue 31: these ran against a daemon
    /// binary, sleeping on the wall clock). A client that keeps talking is not idle; one that stops
    /// is closed when the clock passes `IdleTimeoutSec`, not a moment before.
    @Test func anIdleConnectionIsClosedWhenTheInjectedClockPassesItsTimeout() async throws {
        let core = try await DaemonCore(config: "[Limits]\nIdleTimeoutSec=300\n")
        let client = try core.connect()
        for _ in 0..<3 {
            #expect(try await client.roundTrip(Ping(text: "still here"))?.type == Pong.eventType)
            await core.clock.sleepers(atLeast: 1)
            core.clock.advance(by: .seconds(200))
        }
        #expect(try await client.roundTrip(Ping(text: "still here"))?.type == Pong.eventType, "talking keeps it open")
        await core.clock.sleepers(atLeast: 1)
        core.clock.advance(by: .seconds(299))
        #expect(try await client.roundTrip(Ping(text: "last"))?.type == Pong.eventType, "open before its time")
        await core.clock.sleepers(atLeast: 1)
        core.clock.advance(by: .seconds(300))
        #expect(try await client.next() == nil, "closed once idle for 300 s of the clock")
        await core.stop()
    }

    @Test func aConnectionThatSendsNothingIsClosedByTheHandshakeTimeout() async throws {
        let core = try await DaemonCore(config: "[Limits]\nHandshakeTimeoutSec=10\n")
        let silent = try core.connect()
        await core.clock.sleepers(atLeast: 1)
        core.clock.advance(by: .seconds(9.9))
        await core.clock.sleepers(atLeast: 1)
        core.clock.advance(by: .seconds(0.1))
        #expect(try await silent.next() == nil, "the silent connection was closed at 10 s")
        await core.stop()
    }

    /// A frame trickled a byte every 50 ms (the whole of it would take 10 s) is dropped when its
    /// first byte is `HandshakeTimeoutSec` old, however steadily the bytes come.
    @Test func aSlowLorisSenderIsDroppedByTheHandshakeTimeout() async throws {
        let core = try await DaemonCore(config: "[Limits]\nHandshakeTimeoutSec=0.5\nIdleTimeoutSec=0\n")
        let loris = try core.connect()
        #expect(try await loris.roundTrip(Hello(id: "h", appId: "org.example.loris"))?.type == Welcome.eventType)
        let bytes = try Frame(Ping(text: String(repeating: "z", count: 150))).encoded()
        let answered = Latch()
        // The end of the stream, or a reset (the daemon closed with the trickle unread): closed.
        let reader = Task { () throws -> Frame? in
            defer { answered.open() }
            do {
                return try await loris.next(timeout: .seconds(60))
            } catch is SystemError {
                return nil
            }
        }
        let began = core.clock.elapsed
        var sent = 0
        trickle: while sent < bytes.count {
            try loris.sendRaw([bytes[sent]])
            sent += 1
            // Next byte in 50 ms of the clock, unless the daemon has closed the connection.
            let closed = await withTaskGroup(of: Bool.self) { group in
                group.addTask { await answered.wait(); return true }
                group.addTask { await core.clock.sleepers(atLeast: 1); return false }
                defer { group.cancelAll() }
                return await group.next() ?? true
            }
            if closed { break trickle }
            core.clock.advance(by: .milliseconds(50))
        }
        #expect(try await reader.value == nil, "closed, not answered")
        let took = core.clock.elapsed - began
        #expect(sent < bytes.count && took >= .milliseconds(500) && took <= .milliseconds(600),
                "dropped after \(took) of the clock, \(sent) of \(bytes.count) bytes in")
        await core.stop()
    }

    /// The HTTP front in process: OpenAI's transcription over the front's Unix socket reaches the
    /// coordinator and the stand-in model; an unknown path is 404, a wrong method 405 with Allow.
    @Test func theHTTPFrontTranscribesAndRoutesInProcess() async throws {
        let core = try await DaemonCore()
        let fronts = try await core.openHTTP()
        let socket = try #require(fronts.first?.path)
        func curl(_ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
            try await ChildProcess.run("/usr/bin/curl", ["-sS", "--unix-socket", socket, "-w", "\n%{http_code}"] + arguments, in: core.directory, timeout: .seconds(60))
        }
        let transcribed = try await curl(["-F", "file=@\(AnalysisCoordinatorTests.clip)", "-F", "model=whisper-1", "http://earshot/v1/audio/transcriptions"])
        let lines = transcribed.stdout.split(separator: "\n")
        #expect(lines.last == "200" && lines.first?.contains("\"text\"") == true && transcribed.stdout.contains("w0"), "\(transcribed.stdout) \(transcribed.stderr)")
        #expect(try await curl(["http://earshot/nothing"]).stdout.hasSuffix("404"))
        let wrong = try await curl(["-X", "PUT", "-i", "http://earshot/v1/models"])
        #expect(wrong.stdout.hasSuffix("405") && wrong.stdout.contains("Allow: GET"), "\(wrong.stdout)")
        for front in fronts { await front.stop() }
        await core.stop()
    }
}
