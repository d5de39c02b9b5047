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

    /// `idleTimeout`: the connections' idle timeout in seconds (nil: none).
    init(idleTimeout: Double? = nil) async throws {
        directory = try TempDirectory("escore")
        let config = DaemonConfig()
        let paths = DaemonPaths.resolve(mode: .user, socketFlag: directory.file("earshot.sock"), stateFlag: directory.file("state"),
                                        cacheFlag: directory.file("cache"), config: config, environment: [:])
        let limits = DaemonLimits(frame: config.frameLimits, maxConnections: 16)
        let registry = ConnectionRegistry(limits: ConnectionLimits(maxConnections: 16, maxPerUser: 8, adminReserved: 2, maxPerAddress: 4))
        let logger = Logger(minimum: .error)
        let metrics = DaemonMetrics()
        let errors = ErrorMap(logger: logger, metrics: metrics)
        coordinator = try await CoreFixture.shared.coordinator()
        let facts = DaemonFacts(config: config, paths: paths, socketPath: paths.socket, socketActivated: false, started: .now, limits: limits)
        let assets = try await CoreFixture.shared.assetService()
        let speech = await coordinator.speech
        let harness = DaemonHarness(facts: facts, registry: registry, assets: AssetHarness(assets: assets),
                                    speech: SpeechHarness(speech: speech, coordinator: coordinator, errors: errors, logger: logger), errors: errors)
        server = ConnectionServer(harness: harness, registry: registry, logger: logger,
                                  channelOptions: FrameChannel.Options(limits: limits.frame, frameTimeout: 10, idleTimeout: idleTimeout),
                                  refusals: RefusalLog(logger: logger, clock: clock), clock: clock)
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

    /// The idle timeout runs on the daemon's clock: a connection with nothing in flight is closed
    /// when the clock passes it, and not a moment before.
    @Test func anIdleConnectionIsClosedWhenTheInjectedClockPassesItsTimeout() async throws {
        let core = try await DaemonCore(idleTimeout: 300)
        let client = try core.connect()
        #expect(try await client.roundTrip(Ping(text: "hi"))?.type == Pong.eventType)
        await core.clock.sleepers(atLeast: 1)
        core.clock.advance(by: .seconds(299))
        #expect(try await client.roundTrip(Ping(text: "still here"))?.type == Pong.eventType, "open before its time")
        await core.clock.sleepers(atLeast: 1)
        core.clock.advance(by: .seconds(300))
        #expect(try await client.next() == nil, "closed once idle for 300 s of the clock")
        await core.stop()
    }
}
