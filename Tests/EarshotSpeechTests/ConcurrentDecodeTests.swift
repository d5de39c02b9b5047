@testable import EarshotSpeech
import EarshotWire
import Foundation
import Synchronization
import Testing

/// A transcriber whose calls wait until the test lets each one finish, so tests decide the order
/// in which concurrent decodes complete. Call `i` (in start order) waits for `finish(i)`.
final class HeldTranscriber: SegmentTranscribing, @unchecked Sendable {
    private let lock = NSLock()
    private var next = 0
    private let gates = (0..<16).map { _ in DispatchSemaphore(value: 0) }
    private let starts = DispatchSemaphore(value: 0)
    private let completions = DispatchSemaphore(value: 0)
    private var running = 0
    private var most = 0
    /// Most calls that ran at once.
    var mostAtOnce: Int { lock.withLock { most } }

    func transcribe(_ samples: [Float], sampleRate: Int, settings: DecodeSettings) throws -> Transcription {
        let index = lock.withLock {
            defer { next += 1; running += 1; most = max(most, running) }
            return next
        }
        starts.signal()
        gates[index].wait()
        lock.withLock { running -= 1 }
        defer { completions.signal() }
        return Transcription(text: "segment of \(samples.count) samples", words: [])
    }

    /// Waits (off the cooperative pool) until `count` more calls have started; false after 60 s.
    func waitForStarts(_ count: Int) async -> Bool {
        await waitOn(starts, count)
    }

    /// Lets call `index` finish and waits until it has.
    func finish(_ index: Int) async -> Bool {
        gates[index].signal()
        return await waitOn(completions, 1)
    }

    func finishAll() { gates.forEach { $0.signal() } }

    private func waitOn(_ semaphore: DispatchSemaphore, _ count: Int) async -> Bool {
        await withCheckedContinuation { continuation in
            Thread {
                continuation.resume(returning: (0..<count).allSatisfy { _ in semaphore.wait(timeout: .now() + 60) == .success })
            }.start()
        }
    }
}

/// Issue 10, item 2: one session decodes independent VAD segments concurrently, and its events
/// still arrive exactly as a sequential session's would; the decode window and the daemon-wide
/// gate hold their bounds.
@Suite(.serialized) struct ConcurrentDecodeTests {
    /// Three utterances with silence between them: three segments, the last ended only by finish.
    static func audio() throws -> [Float] {
        let speech = try SessionTests.speech()
        return SessionTests.silence(0.5) + speech + SessionTests.silence(1.5) + speech + SessionTests.silence(1.5) + speech
    }

    static let detector = ModuleConfiguration(kind: .detector, locale: nil, reportingOptions: ["reportResults"], sensitivity: "medium")

    func session(_ transcriber: any SegmentTranscribing, parallelism: Int, log: EventLog) throws -> AnalysisSession {
        try #require(FileManager.default.fileExists(atPath: SessionTests.vadModel), "run Scripts/setup.sh: it installs the Silero VAD model")
        let vad = try SileroDetector(configuration: .init(modelPath: SessionTests.vadModel, sensitivity: .medium))
        let modules = [SessionModule(index: 0, configuration: SessionTests.transcriber, engine: .segments(transcriber)),
                       SessionModule(index: 1, configuration: Self.detector, engine: .detector)]
        return AnalysisSession(id: "c", modules: modules, vad: vad, decodeParallelism: parallelism) { log.append($0) }
    }

    /// Every event, comparable: results as (final, module, range, text), ranges, finished.
    static func trace(_ log: EventLog) -> [String] {
        log.events.map { event in
            switch event {
            case .result(let r): "result final=\(r.isFinal) module=\(r.module) \(r.range) speech=\(String(describing: r.speechDetected)) \(r.text)"
            case .volatileRange(let range): "volatile \(String(describing: range))"
            case .finished(let error): "finished \(String(describing: error))"
            }
        }
    }

    /// A session on one lane, abandoned while `held` holds its first decode: the second segment's
    /// decode blocks the session's queue.
    func abandonedBusySession(_ held: HeldTranscriber) async throws -> AnalysisSession {
        let session = try session(held, parallelism: 1, log: EventLog())
        await session.accept(SessionTests.pcm(try Self.audio()), format: .speech16k, start: nil)
        #expect(await held.waitForStarts(1))
        session.abandon()
        return session
    }

    /// Regression (CI, graceful shutdown): handing a session's detector back for reuse waited on the
    /// session's queue even when the session was only abandoned, so the shutdown deadline waited on
    /// its queued work and let the cancelled session's `finished` out before its connection closed.
    /// An abandoned session hands back no detector at once: nothing waits behind a blocked queue
    /// (``anAbandonedSessionsDetectorComesBackAfterItsQueuedWork``: the service takes it later).
    @Test func aBusyAbandonedSessionHandsBackNoDetectorAndNobodyWaitsForIt() async throws {
        let held = HeldTranscriber()
        defer { held.finishAll() }
        let session = try await abandonedBusySession(held)
        #expect(await session.releaseDetector() == nil, "a session that has not finished keeps its detector")
        held.finishAll()
        _ = await session.finish(.cancelNow, time: nil)
        #expect(await session.releaseDetector() != nil, "once finished, its detector is handed back")
        #expect(await session.releaseDetector() == nil, "only once")
    }

    /// Regression: an abandoned session's detector was destroyed, so the next open built a new
    /// one. Asked for after the abandon, it comes back once the work queued before is done.
    @Test func anAbandonedSessionsDetectorComesBackAfterItsQueuedWork() async throws {
        let held = HeldTranscriber()
        defer { held.finishAll() }
        let session = try await abandonedBusySession(held)
        let later = Task { await session.releaseDetectorAfterQueuedWork() }
        held.finishAll()
        #expect(await later.value != nil, "handed back once the abandon has run")
        #expect(await session.releaseDetector() == nil, "only once")
    }

    @Test func concurrentlyDecodedSegmentsArriveInOrderAndMatchTheSequentialSession() async throws {
        let audio = try Self.audio()
        let sequentialLog = EventLog()
        let unheld = HeldTranscriber()
        unheld.finishAll()
        let sequential = try session(unheld, parallelism: 1, log: sequentialLog)
        await sequential.accept(SessionTests.pcm(audio), format: .speech16k, start: nil)
        _ = await sequential.finish(.finalizeThroughEndOfInput, time: nil)

        let held = HeldTranscriber()
        let log = EventLog()
        let concurrent = try session(held, parallelism: 3, log: log)
        await concurrent.accept(SessionTests.pcm(audio), format: .speech16k, start: nil)
        // The first two segments decode at once (the third ends only at finish).
        #expect(await held.waitForStarts(2))
        // The second finishes first: nothing of it may come out before the first.
        #expect(await held.finish(1))
        #expect(log.finals.filter { $0.module == 0 }.isEmpty)
        #expect(await held.finish(0))
        let finishing = Task { await concurrent.finish(.finalizeThroughEndOfInput, time: nil) }
        #expect(await held.waitForStarts(1))
        #expect(await held.finish(2))
        _ = await finishing.value

        #expect(held.mostAtOnce == 2)
        #expect(log.finals.filter { $0.module == 0 }.count == 3)
        #expect(Self.trace(log) == Self.trace(sequentialLog))
        #expect(log.finished.count == 1)
    }

    @Test(.enabled(if: SherpaFixture.bothAvailable, "needs Whisper tiny.en and the silero VAD model (Scripts/setup.sh)"))
    func whisperGivesTheSequentialTranscriptWhenSegmentsDecodeConcurrently() async throws {
        let model = try SherpaFixture.model()
        let (samples, _) = try SherpaFixture.concatenation(longerThan: 30, silence: 1)
        var traces: [[String]] = []
        for parallelism in [1, 3] {
            var configuration = SileroDetector.Configuration.transcription
            configuration.modelPath = SessionTests.vadModel
            let log = EventLog()
            let session = AnalysisSession(id: "w\(parallelism)", modules: [SessionModule(index: 0, configuration: SessionTests.transcriber, engine: .segments(model))],
                                          vad: try SileroDetector(configuration: configuration), decodeParallelism: parallelism) { log.append($0) }
            for start in stride(from: 0, to: samples.count, by: 8000) {
                await session.accept(SessionTests.pcm(Array(samples[start..<min(start + 8000, samples.count)])), format: .speech16k, start: nil)
            }
            _ = await session.finish(.finalizeThroughEndOfInput, time: nil)
            #expect(log.finals.count >= 5)
            traces.append(Self.trace(log))
        }
        #expect(traces[0] == traces[1])
    }

    @Test func aSessionDecodesAtMostItsParallelism() async throws {
        let held = HeldTranscriber()
        let log = EventLog()
        let session = try session(held, parallelism: 2, log: log)
        await session.accept(SessionTests.pcm(try Self.audio()), format: .speech16k, start: nil)
        let finishing = Task { await session.finish(.finalizeThroughEndOfInput, time: nil) }
        #expect(await held.waitForStarts(2))
        held.finishAll()
        _ = await finishing.value
        #expect(held.mostAtOnce == 2)
        #expect(log.finals.filter { $0.module == 0 }.count == 3)
    }

    @Test func theWindowAdmitsNoMoreAudioThanItsBound() async throws {
        let window = DecodeWindow(label: "test.window", lanes: 4, maxSamples: 100)
        let first = DispatchSemaphore(value: 0)
        window.reserve(samples: 60)
        window.run(reserved: 60) { lane in
            first.wait()
            window.release(lane: lane, samples: 60)
        }
        // A second 60-sample decode waits for the first to release: it never sees 120 held.
        let seen = Task.detached {
            await withCheckedContinuation { (continuation: CheckedContinuation<Int, Never>) in
                Thread {
                    window.reserve(samples: 60)
                    window.run(reserved: 60) { lane in
                        let held = window.samples
                        window.release(lane: lane, samples: 60)
                        continuation.resume(returning: held)
                    }
                }.start()
            }
        }
        first.signal()
        #expect(await seen.value == 60)
        #expect(window.samples == 0)
        // A reservation for a decode that will not run goes back.
        window.reserve(samples: 90)
        #expect(window.samples == 90)
        window.unreserve(samples: 90)
        #expect(window.samples == 0)
    }

    @Test func theGateServesTheSessionHoldingFewestSlotsFirst() {
        let waiting: [(client: String, ticket: Int)] = [("long", 3), ("long", 4), ("other", 5)]
        #expect(DecodeGate.next(waiting, held: ["long": 2]) == 5)
        #expect(DecodeGate.next(waiting, held: [:]) == 3)
        #expect(DecodeGate.next(waiting, held: ["long": 1, "other": 1]) == 3)
        #expect(DecodeGate.next([], held: [:]) == nil)
    }
}

/// A model that starts its decode before it asks for its earlier text, as the engine process's
/// Whisper encodes first; it says when it asks and answers with the text it was given.
final class EncodesFirst: SegmentTranscribing, @unchecked Sendable {
    let asking = DispatchSemaphore(value: 0)

    func transcribe(_ samples: [Float], sampleRate: Int, settings: DecodeSettings) throws -> Transcription {
        Transcription(text: "after \(settings.previousText ?? "nothing")", language: "en")
    }

    func transcribe(_ samples: [Float], sampleRate: Int, settings: DecodeSettings, previousText: () -> String?) throws -> Transcription {
        asking.signal()
        return Transcription(text: "after \(previousText() ?? "nothing")", language: "en")
    }
}

extension ConcurrentDecodeTests {
    /// A conditioned recording's next window starts its decode (the engine encodes it) before
    /// the window before has ended, and then waits for that window's text. It must not hold a
    /// decode slot while it waits: with every slot held by such windows, the windows whose text
    /// they wait for could never decode. One slot here: the second window has it and waits, and
    /// the first still decodes.
    @Test func aWindowWaitingForItsEarlierTextHoldsNoDecodeSlot() {
        let model = EncodesFirst()
        let gated = GatedTranscriber(model: model, gate: DecodeGate(slots: 1), client: "recording", engine: "whisper", observer: nil)
        let relay = TextRelay()
        let (first, second) = (relay.link(), relay.link())
        let texts = Mutex<[Int: String]>([:])
        let done = DispatchSemaphore(value: 0)
        for (index, link) in [(1, second), (0, first)] {
            Thread {
                let prompted = TextRelay.Prompted(gated, link: link)
                let text = (try? prompted.transcribe([0], sampleRate: 16000))?.text ?? "failed"
                link.pass(text, after: prompted.previousText())
                texts.withLock { $0[index] = text }
                done.signal()
            }.start()
            // The second window is in its decode, waiting for its text, before the first starts.
            if index == 1 { model.asking.wait() }
        }
        #expect(done.wait(timeout: .now() + 60) == .success && done.wait(timeout: .now() + 60) == .success, "the windows deadlocked on the slot")
        #expect(texts.withLock { $0 } == [0: "after nothing", 1: "after after nothing"])
    }
}
