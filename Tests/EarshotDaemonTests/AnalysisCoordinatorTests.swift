import EarshotAssets
import EarshotAudio
@testable import EarshotDaemon
import EarshotSpeech
import EarshotSystem
import EarshotWire
import Foundation
import Testing
import TestSupport

/// A Whisper-class model that answers at once: a word per half second of the audio it is given.
final class HalfSecondWords: SegmentTranscribing, @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    /// How many decodes it ran.
    var decodes: Int { lock.withLock { count } }

    func transcribe(_ samples: [Float], sampleRate: Int, settings: DecodeSettings) throws -> Transcription {
        lock.withLock { count += 1 }
        let words = (0..<max(1, samples.count * 2 / sampleRate)).map {
            RecognizedWord(text: "w\($0)", start: Double($0) / 2, end: Double($0 + 1) / 2, confidence: 0.9)
        }
        return Transcription(text: words.map(\.text).joined(separator: " "), words: words, confidence: 0.9, language: "en")
    }
}

/// The daemon's core in process (issue 31): the real asset service on a private state directory
/// (the embedded catalog's transcriber and detector installed once), the real speech service
/// with a stand-in Whisper model, and the coordinator over both — no daemon binary, no socket.
actor CoreFixture {
    static let shared = CoreFixture()

    private var assets: AssetService?
    private var directory: TempDirectory?
    let model = HalfSecondWords()

    /// The asset service with `transcriber` and `detector` for en-US installed (once per run).
    func assetService() async throws -> AssetService {
        if let assets { return assets }
        let directory = try TempDirectory("escore")
        directory.removeAtExit()
        self.directory = directory
        let settings = AssetSettings(stateDirectory: directory.file("state"), cacheDirectory: directory.file("cache"),
                                     catalogURLs: ["file://" + EmbeddedModels.catalog], keyDirectories: [EmbeddedModels.prefix + "/keys"])
        let service = try AssetService(settings: settings)
        try await service.start()
        Task { await service.run() }
        _ = try await service.install([CoreFixture.transcriber, CoreFixture.progressive, ModuleConfiguration(kind: .detector, locale: nil)],
                                      for: ClientIdentity(uid: getuid(), appID: "org.example.core"), progress: { _ in })
        assets = service
        return service
    }

    static let transcriber = ModuleConfiguration(kind: .transcriber, locale: "en-US")
    /// What installs tiny.en, the asset the catalog prefers for `progressiveTranscription`.
    static let progressive = ModuleConfiguration(kind: .transcriber, locale: "en-US", preset: "progressiveTranscription")

    /// A coordinator over a new speech service (so each test has its own admission and models),
    /// its models lingering `linger` seconds of `clock`, decoding with `model` (the shared one
    /// when nil; a test that counts decodes passes its own, as other suites decode concurrently).
    func coordinator(maxConcurrent: Int = 4, maxQueued: Int = 16, linger: Double = 0, clock: ManualClock = ManualClock(),
                     model: HalfSecondWords? = nil) async throws -> AnalysisCoordinator {
        let settings = SpeechSettings(maxConcurrentAnalyses: maxConcurrent, maxConcurrentAnalysesHard: 16, lingerSeconds: linger, maxKeepAliveSeconds: 0,
                                      inferenceThreads: 1, batchThreads: 0, recordingWindowSeconds: 0, maxQueued: maxQueued)
        let model = model ?? self.model
        let speech = SpeechService(settings: settings, clock: clock, segmentModels: SegmentModelLoader { _, _ in (model, 1 << 20) })
        return AnalysisCoordinator(speech: speech, assets: try await assetService())
    }
}

/// What a session sent its client.
final class SessionLog: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [AnalysisEvent] = []
    func add(_ event: AnalysisEvent) { lock.withLock { events.append(event) } }
    /// Volatile results and volatile ranges reported.
    var volatile: Int {
        lock.withLock {
            events.filter {
                switch $0 {
                case .result(let result): !result.isFinal
                case .volatileRange: true
                case .finished: false
                }
            }.count
        }
    }
    var finals: [String] {
        lock.withLock { events.compactMap { if case .result(let r) = $0, r.isFinal { r.text } else { nil } } }
    }
    var finished: (error: (any Error)?, shutdown: Bool)? {
        lock.withLock { events.lazy.compactMap { if case .finished(let error, let shutdown) = $0 { (error, shutdown) } else { nil } }.first }
    }
}

@Suite(.serialized, .enabled(if: EmbeddedModels.runs(FileManager.default.fileExists(atPath: EmbeddedModels.catalog)), "needs the embedded catalog (Scripts/setup.sh)"))
struct AnalysisCoordinatorTests {
    static let clip = "/usr/share/pocketsphinx/test/data/librivox/sense_and_sensibility_01_austen_64kb-0870.wav"
    static let format = AudioFormatSpec(rate: 16000, width: 2, channels: 1)

    /// The clip as 16 kHz s16le bytes.
    static func pcm() throws -> [UInt8] {
        let reader = try AudioFileReader(path: clip)
        #expect(reader.sampleRate == 16000 && reader.channels == 1)
        return PCMSamples.s16le(try reader.readAll())
    }

    static func open(_ coordinator: AnalysisCoordinator, connection: Int, log: SessionLog,
                     retention: ModelRetention = .whileInUse) async throws -> String {
        try await coordinator.open([CoreFixture.transcriber], options: AnalysisOptions(modelRetention: retention, input: .recording), context: AnalysisContextData(),
                                   for: AnalysisClient(connection: connection, uid: getuid(), appID: "org.example.core")) { _, event in log.add(event) }
    }

    @Test func openFeedAndFinishGiveFinalResultsAndReleaseEverything() async throws {
        let coordinator = try await CoreFixture.shared.coordinator()
        let log = SessionLog()
        let id = try await Self.open(coordinator, connection: 1, log: log)
        #expect(coordinator.sessions.hasSessions(1))
        let pcm = try Self.pcm()
        #expect(await coordinator.feed(pcm, format: Self.format, start: nil, session: id, of: 1))
        let last = try await coordinator.control(.finish(.finalizeThroughEndOfInput, time: nil), session: id, of: 1)
        #expect(last == WireTime(sample: Int64(pcm.count / 2), sampleRate: 16000))
        #expect(!log.finals.isEmpty && log.finals.allSatisfy { $0.hasPrefix("w0") }, "\(log.finals)")
        #expect(!coordinator.sessions.hasSessions(1), "released at finish")
        #expect(await coordinator.speech.stats().sessions == 0)
        #expect(await coordinator.feed(pcm, format: Self.format, start: nil, session: id, of: 1) == false, "a finished session takes no audio")
    }

    /// Regression (a Wyoming or OpenAI request naming tiny.en decoded volatile results nobody
    /// reads): the name reaches its asset through the asset's preferred preset,
    /// `progressiveTranscription`, and the session took that preset's volatile results too — a
    /// greedy decode of the utterance each second, one of which the final result waited for
    /// (tiny.en's Wyoming latency 0.31–0.32× the peer's against base's 0.25–0.28×). The session
    /// now runs the asset without the preset: final results only, one decode per segment.
    @Test func aTranscriptionNamingAProgressiveAssetDecodesNoVolatileResults() async throws {
        // Its own model: DaemonCoreTests decode on the shared one at the same time (regression: a
        // full run counted one of theirs here, "2 decodes" for one final result).
        let model = HalfSecondWords(), before = model.decodes
        let coordinator = try await CoreFixture.shared.coordinator(model: model)
        let log = SessionLog()
        let id = try await coordinator.openTranscription(TranscriptionRequest(name: "whisper-tiny-en", language: "en"),
                                                         for: AnalysisClient(connection: 3, uid: getuid(), appID: "org.example.core")) { _, event in log.add(event) }
        let leased = await coordinator.assets.leasedAssets
        #expect(leased.contains { $0.hasPrefix("whisper-tiny-en@") }, "the named asset serves: \(leased)")
        let pcm = try Self.pcm()
        // Fed as a live client sends it: a tenth of a second at a time.
        for start in stride(from: 0, to: pcm.count, by: 3200) {
            #expect(await coordinator.feed(Array(pcm[start..<min(start + 3200, pcm.count)]), format: Self.format, start: nil, session: id, of: 3))
        }
        _ = try await coordinator.control(.finish(.finalizeThroughEndOfInput, time: nil), session: id, of: 3)
        #expect(!log.finals.isEmpty)
        #expect(log.volatile == 0, "volatile results or ranges reported: \(log.volatile)")
        #expect(model.decodes - before == log.finals.count, "one decode per final result, no volatile decodes (\(model.decodes - before) decodes)")
    }

    @Test func aClientReachesOnlyItsOwnSessions() async throws {
        let coordinator = try await CoreFixture.shared.coordinator()
        let id = try await Self.open(coordinator, connection: 1, log: SessionLog())
        #expect(await coordinator.feed([0, 0], format: Self.format, start: nil, session: id, of: 2) == false)
        await #expect(throws: AnalysisError.self) { _ = try await coordinator.control(.finalize(through: nil), session: id, of: 2) }
        await coordinator.connectionClosed(1)
    }

    @Test func aConnectionThatHangsUpEndsItsSessionsAndGivesBackWhatTheyHeld() async throws {
        let coordinator = try await CoreFixture.shared.coordinator()
        let log = SessionLog()
        let id = try await Self.open(coordinator, connection: 7, log: log)
        _ = await coordinator.feed(Array(try Self.pcm().prefix(32000)), format: Self.format, start: nil, session: id, of: 7)
        await coordinator.connectionClosed(7)
        #expect(!coordinator.sessions.hasSessions(7) && coordinator.sessions.isEmpty)
        #expect(await coordinator.speech.stats().sessions == 0)
        let leased = await coordinator.assets.leasedAssets
        #expect(leased.isEmpty, "leases given back: \(leased)")
    }

    @Test func openingBeyondTheLimitWithNoQueueIsRefusedAndASlotFreesAtClose() async throws {
        let coordinator = try await CoreFixture.shared.coordinator(maxConcurrent: 1, maxQueued: 0)
        let first = try await Self.open(coordinator, connection: 1, log: SessionLog())
        await #expect(throws: SpeechError.self) { _ = try await Self.open(coordinator, connection: 2, log: SessionLog()) }
        #expect(!coordinator.sessions.hasSessions(2), "a refused open holds nothing")
        await coordinator.cancel(first, of: 1)
        let second = try await Self.open(coordinator, connection: 2, log: SessionLog())
        await coordinator.cancel(second, of: 2)
    }

    @Test func badOpensAreTypedErrors() async throws {
        let coordinator = try await CoreFixture.shared.coordinator()
        let client = AnalysisClient(connection: 3, uid: getuid(), appID: nil)
        await #expect(throws: AnalysisError.self) {
            _ = try await coordinator.open([], options: AnalysisOptions(), context: AnalysisContextData(), for: client) { _, _ in }
        }
        await #expect(throws: AnalysisError.self) {
            _ = try await coordinator.open([ModuleConfiguration(kind: .detector, locale: nil)], options: AnalysisOptions(), context: AnalysisContextData(), for: client) { _, _ in }
        }
        await #expect(throws: (any Error).self) {
            _ = try await coordinator.open([ModuleConfiguration(kind: .transcriber, locale: "xx-YY")], options: AnalysisOptions(), context: AnalysisContextData(), for: client) { _, _ in }
        }
        #expect(coordinator.sessions.isEmpty)
    }

    /// Shutdown finishes open sessions through the end of their input (their results reach the
    /// client, marked as the shutdown's), refuses new ones, and ends `run()` once drained.
    @Test func shutdownFinishesOpenSessionsRefusesNewOnesAndEndsTheReleaseLoop() async throws {
        let coordinator = try await CoreFixture.shared.coordinator()
        let running = Task { await coordinator.run() }
        let log = SessionLog()
        let id = try await Self.open(coordinator, connection: 4, log: log)
        _ = await coordinator.feed(try Self.pcm(), format: Self.format, start: nil, session: id, of: 4)
        await coordinator.beginShutdown()
        await #expect(throws: AnalysisError.self) { _ = try await Self.open(coordinator, connection: 5, log: SessionLog()) }
        await coordinator.drained()
        await running.value
        #expect(log.finished?.shutdown == true && log.finished?.error == nil)
        #expect(!log.finals.isEmpty, "the input was finished, not dropped")
        #expect(coordinator.sessions.isEmpty)
    }

    /// Retention on the speech service's clock (issue 31: against a daemon binary these slept on
    /// the wall clock): a lingering model stays `LingerSeconds` after its session, and not longer.
    @Test func aLingeringModelStaysForLingerSecondsOfTheClock() async throws {
        let clock = ManualClock()
        let coordinator = try await CoreFixture.shared.coordinator(linger: 1, clock: clock)
        let id = try await Self.open(coordinator, connection: 1, log: SessionLog(), retention: .lingering)
        _ = try await coordinator.control(.finish(.cancelNow, time: nil), session: id, of: 1)
        let speech = await coordinator.speech
        let right = await speech.stats()
        #expect(right.sessions == 0 && right.models.count == 1 && right.models.first?.users == 0, "still loaded right after: \(right.models)")
        clock.advance(by: .milliseconds(999))
        #expect(await speech.stats().models.count == 1, "not before LingerSeconds")
        clock.advance(by: .milliseconds(1))
        #expect(await speech.stats().models.isEmpty, "unloaded at LingerSeconds")
    }

    @Test func processLifetimeKeepsTheModelUntilTheConnectionCloses() async throws {
        let clock = ManualClock()
        let coordinator = try await CoreFixture.shared.coordinator(linger: 1, clock: clock)
        let id = try await Self.open(coordinator, connection: 9, log: SessionLog(), retention: .processLifetime)
        _ = try await coordinator.control(.finish(.cancelNow, time: nil), session: id, of: 9)
        clock.advance(by: .seconds(3600))
        let speech = await coordinator.speech
        let kept = await speech.stats()
        #expect(kept.sessions == 0 && kept.models.count == 1, "processLifetime keeps the model while the client lives: \(kept.models)")
        await coordinator.connectionClosed(9)
        #expect(await speech.stats().models.isEmpty, "its client gone, the model goes")
    }
}
