@testable import EarshotSpeech
import EarshotSystem
import EarshotWire
import Foundation
import Testing
import TestSupport

/// The shared model cache's retention, with an injected clock and a stand-in model.
@Suite struct ModelCacheTests {
    struct Model: SegmentTranscribing {
        func transcribe(_ samples: [Float], sampleRate: Int) throws -> Transcription { Transcription(text: "") }
    }

    static func loadedKeys(_ cache: ModelCache) async -> [String] { await cache.loaded.map(\.key) }

    /// A model whose engine process can end, as a crashed `earshot-engine` ends a `WhisperModel`.
    final class EngineBacked: SegmentTranscribing, @unchecked Sendable {
        private let alive = OnceFlag()
        func transcribe(_ samples: [Float], sampleRate: Int) throws -> Transcription { Transcription(text: "") }
        var isUsable: Bool { !alive.isSet }
        func engineEnded() { alive.set() }
    }

    /// A model whose engine process crashed is not handed to the next session: it loads again.
    @Test func aModelWhoseEngineEndedIsLoadedAgain() async throws {
        let cache = ModelCache(lingerSeconds: 300, clock: ManualClock())
        let first = EngineBacked()
        _ = try await cache.acquire("m") { (first, 1) }
        await cache.release("m", retention: .lingering, owner: 1, uid: 1000)
        #expect(try await cache.acquire("m") { (EngineBacked(), 1) } as? EngineBacked === first)
        await cache.release("m", retention: .lingering, owner: 1, uid: 1000)
        first.engineEnded()
        let second = try await cache.acquire("m") { (EngineBacked(), 1) }
        #expect(second as? EngineBacked !== first)
        #expect(second.isUsable)
        #expect(await cache.loads == 2)
    }

    /// Issue 8, defect 13: `end-retention` from one user unloaded every user's lingering models.
    @Test func endRetentionDropsOnlyTheCallersRetention() async throws {
        let clock = ManualClock()
        let cache = ModelCache(lingerSeconds: 300, clock: clock)
        for _ in 0..<2 { _ = try await cache.acquire("m") { (Model(), 1) } }
        // uid 1000 lets it linger, uid 2000 keeps it for its connection 7's lifetime.
        await cache.release("m", retention: .lingering, owner: 1, uid: 1000)
        await cache.release("m", retention: .processLifetime, owner: 7, uid: 2000)
        #expect(await Self.loadedKeys(cache) == ["m"])

        // Another user ending retention changes nothing.
        await cache.endRetention(uid: 3000)
        #expect(await Self.loadedKeys(cache) == ["m"])
        // uid 1000's lingering goes; uid 2000's pin keeps the model.
        await cache.endRetention(uid: 1000)
        #expect(await Self.loadedKeys(cache) == ["m"])
        await cache.endRetention(uid: 2000)
        #expect(await Self.loadedKeys(cache).isEmpty)
        #expect(await cache.loads == 1)
    }

    @Test func lingeringIsKeptPerUserUntilItsTimeRunsOut() async throws {
        let clock = ManualClock()
        let cache = ModelCache(lingerSeconds: 300, clock: clock)
        _ = try await cache.acquire("m") { (Model(), 1) }
        await cache.release("m", retention: .lingering, owner: 1, uid: 1000)
        clock.advance(200)
        _ = try await cache.acquire("m") { (Model(), 1) }
        await cache.release("m", retention: .lingering, owner: 2, uid: 2000)
        // uid 1000's time ran out at 300 s; uid 2000's lasts until 500 s.
        clock.advance(150)
        await cache.evict()
        #expect(await Self.loadedKeys(cache) == ["m"])
        await cache.endRetention(uid: 2000)
        #expect(await Self.loadedKeys(cache).isEmpty, "uid 1000's lingering had expired")
        // Sessions still using a model keep it whatever anyone ends.
        _ = try await cache.acquire("m") { (Model(), 1) }
        await cache.endRetention(uid: 1000)
        #expect(await Self.loadedKeys(cache) == ["m"])
        #expect(await cache.loads == 2)
    }

    /// The evictor unloads a lingering model at exactly the linger time of the injected clock
    /// (it used to poll once a real second), or at the session's keep-alive when it set one.
    @Test(arguments: [nil, Duration.seconds(5)])
    func evictorUnloadsAtExactlyTheLingerTime(keepAlive: Duration?) async throws {
        let clock = ManualClock()
        let cache = ModelCache(lingerSeconds: 300, clock: clock)
        let evictor = Task { await cache.runEvictor() }
        defer { evictor.cancel() }
        let deadline = keepAlive ?? .seconds(300)
        _ = try await cache.acquire("m") { (Model(), 1) }
        await cache.release("m", retention: .lingering, keepAlive: keepAlive, owner: 1, uid: 1000)
        await clock.sleepers(atLeast: 1)
        #expect(clock.requestedSleeps.last == deadline, "the evictor sleeps until the deadline")
        clock.advance(by: deadline - .nanoseconds(1))
        #expect(await Self.loadedKeys(cache) == ["m"], "one nanosecond early it stays")
        clock.advance(by: .nanoseconds(1))
        #expect(await Self.eventuallyUnloaded(cache), "unloaded at \(deadline)")
        evictor.cancel()
        await evictor.value
    }

    /// Issue 10: a keep-alive (Ollama's `keep_alive`) replaces the user's lingering deadline
    /// instead of extending it; zero unloads the model once nobody uses it.
    @Test func keepAliveReplacesTheUsersDeadline() async throws {
        let clock = ManualClock()
        let cache = ModelCache(lingerSeconds: 300, clock: clock)
        _ = try await cache.acquire("m") { (Model(), 1) }
        await cache.release("m", retention: .lingering, owner: 1, uid: 1000)
        // A shorter keep-alive from the same user shortens the 300 s of LingerSeconds.
        _ = try await cache.acquire("m") { (Model(), 1) }
        await cache.release("m", retention: .lingering, keepAlive: .seconds(30), owner: 1, uid: 1000)
        clock.advance(29)
        await cache.evict()
        #expect(await Self.loadedKeys(cache) == ["m"])
        clock.advance(1)
        await cache.evict()
        #expect(await Self.loadedKeys(cache).isEmpty, "unloaded at 30 s, not 300 s")

        // Zero: gone as soon as nobody uses it — but another user's lingering keeps it.
        _ = try await cache.acquire("m") { (Model(), 1) }
        await cache.release("m", retention: .lingering, keepAlive: .zero, owner: 1, uid: 1000)
        #expect(await Self.loadedKeys(cache).isEmpty)
        _ = try await cache.acquire("m") { (Model(), 1) }
        await cache.release("m", retention: .lingering, owner: 2, uid: 2000)
        _ = try await cache.acquire("m") { (Model(), 1) }
        await cache.release("m", retention: .lingering, keepAlive: .zero, owner: 1, uid: 1000)
        #expect(await Self.loadedKeys(cache) == ["m"], "uid 2000's lingering stays")
        #expect(await cache.loads == 3)
    }

    @Test func keepAlivesAreCappedByTheSettings() {
        let settings = SpeechSettings(maxKeepAliveSeconds: 60)
        #expect(settings.keepAlive(granting: AnalysisOptions(modelRetention: .lingering)) == nil)
        let within = settings.keepAlive(granting: AnalysisOptions(modelRetention: .lingering, keepAliveSeconds: 60))
        #expect(within?.seconds == 60 && within?.clamped == false)
        let above = settings.keepAlive(granting: AnalysisOptions(modelRetention: .lingering, keepAliveSeconds: 1e300))
        #expect(above?.seconds == 60 && above?.clamped == true)
    }

    /// Waits (by yielding, not by time) until the evictor has run.
    static func eventuallyUnloaded(_ cache: ModelCache) async -> Bool {
        for _ in 0..<10_000 {
            if await loadedKeys(cache).isEmpty { return true }
            await Task.yield()
        }
        return false
    }
}
