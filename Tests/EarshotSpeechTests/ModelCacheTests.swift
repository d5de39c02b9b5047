@testable import EarshotSpeech
import EarshotSystem
import EarshotWire
import Foundation
import Testing
import TestSupport

/// The shared model cache's retention, with an injected clock and a stand-in model.
@Suite struct ModelCacheTests {
    struct Model: SegmentTranscribing {
        func transcribe(_ samples: [Float], sampleRate: Int, settings: DecodeSettings) throws -> Transcription { Transcription(text: "") }
    }

    static func loadedKeys(_ cache: ModelCache) async -> [String] { await cache.loaded.map(\.key) }

    /// A model whose engine process can end, as a crashed `earshot-engine` ends a `WhisperModel`.
    final class EngineBacked: SegmentTranscribing, @unchecked Sendable {
        private let alive = OnceFlag()
        func transcribe(_ samples: [Float], sampleRate: Int, settings: DecodeSettings) throws -> Transcription { Transcription(text: "") }
        var isUsable: Bool { !alive.isSet }
        func engineEnded() { alive.set() }
    }

    /// A model whose engine process crashed is not handed to the next session: it loads again.
    @Test func aModelWhoseEngineEndedIsLoadedAgain() async throws {
        let cache = ModelCache(lingerSeconds: 300, clock: ManualClock())
        let first = EngineBacked()
        _ = try await cache.acquire("m") { (first, 1) }
        await cache.release("m", retention: .lingering, owner: SessionOwner(token: 1), uid: 1000)
        #expect(try await cache.acquire("m") { (EngineBacked(), 1) } as? EngineBacked === first)
        await cache.release("m", retention: .lingering, owner: SessionOwner(token: 1), uid: 1000)
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
        await cache.release("m", retention: .lingering, owner: SessionOwner(token: 1), uid: 1000)
        await cache.release("m", retention: .processLifetime, owner: SessionOwner(token: 7), uid: 2000)
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
        await cache.release("m", retention: .lingering, owner: SessionOwner(token: 1), uid: 1000)
        clock.advance(200)
        _ = try await cache.acquire("m") { (Model(), 1) }
        await cache.release("m", retention: .lingering, owner: SessionOwner(token: 2), uid: 2000)
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
        await cache.release("m", retention: .lingering, keepAlive: keepAlive, owner: SessionOwner(token: 1), uid: 1000)
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
        await cache.release("m", retention: .lingering, owner: SessionOwner(token: 1), uid: 1000)
        // A shorter keep-alive from the same user shortens the 300 s of LingerSeconds.
        _ = try await cache.acquire("m") { (Model(), 1) }
        await cache.release("m", retention: .lingering, keepAlive: .seconds(30), owner: SessionOwner(token: 1), uid: 1000)
        clock.advance(29)
        await cache.evict()
        #expect(await Self.loadedKeys(cache) == ["m"])
        clock.advance(1)
        await cache.evict()
        #expect(await Self.loadedKeys(cache).isEmpty, "unloaded at 30 s, not 300 s")

        // Zero: gone as soon as nobody uses it — but another user's lingering keeps it.
        _ = try await cache.acquire("m") { (Model(), 1) }
        await cache.release("m", retention: .lingering, keepAlive: .zero, owner: SessionOwner(token: 1), uid: 1000)
        #expect(await Self.loadedKeys(cache).isEmpty)
        _ = try await cache.acquire("m") { (Model(), 1) }
        await cache.release("m", retention: .lingering, owner: SessionOwner(token: 2), uid: 2000)
        _ = try await cache.acquire("m") { (Model(), 1) }
        await cache.release("m", retention: .lingering, keepAlive: .zero, owner: SessionOwner(token: 1), uid: 1000)
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

/// Issue 29 item 5: loaded models stay within a memory budget — a user asking for one language
/// after another no longer loads a copy of the same weights for each until the machine runs out.
@Suite struct ModelMemoryBudgetTests {
    static func keys(_ cache: ModelCache) async -> [String] { await cache.loaded.map(\.key) }

    @Test func idleModelsGoLeastRecentlyUsedFirstToMakeRoom() async throws {
        let clock = ManualClock()
        let cache = ModelCache(lingerSeconds: 300, clock: clock, memoryBudget: 300)
        for key in ["en", "de"] {
            _ = try await cache.acquire(key, family: "base") { (ModelCacheTests.Model(), 100) }
            clock.advance(by: .seconds(1))
            await cache.release(key, retention: .lingering, owner: SessionOwner(token: 1), uid: 1000)
        }
        // "en" is used again, so "de" is the least recently used idle model.
        _ = try await cache.acquire("en") { (ModelCacheTests.Model(), 100) }
        clock.advance(by: .seconds(1))
        await cache.release("en", retention: .processLifetime, owner: SessionOwner(token: 1), uid: 1000)
        _ = try await cache.acquire("fr", family: "base") { (ModelCacheTests.Model(), 100) }
        #expect(await Self.keys(cache) == ["de", "en", "fr"], "300 bytes: all three fit")
        // A fourth needs room: "de" goes, "en" (pinned, but idle and used later) stays.
        _ = try await cache.acquire("es", family: "base") { (ModelCacheTests.Model(), 100) }
        #expect(await Self.keys(cache) == ["en", "es", "fr"])
        #expect(await cache.loaded.reduce(0) { $0 + $1.memoryBytes } <= 300)
    }

    @Test func aLoadThatCannotFitBesideModelsInUseIsRefusedAndOneModelAlwaysLoads() async throws {
        let cache = ModelCache(lingerSeconds: 300, clock: ManualClock(), memoryBudget: 250)
        // Larger than the whole budget, but nothing else is loaded: it loads.
        _ = try await cache.acquire("large", family: "large", estimate: 400) { (ModelCacheTests.Model(), 400) }
        // In use, so it cannot make room: refused, with the numbers, before loading anything.
        await #expect(throws: SpeechError.modelMemory(needed: 100, budget: 250, inUse: 400)) {
            _ = try await cache.acquire("small", family: "small", estimate: 100) {
                Issue.record("a refused load must not run")
                return (ModelCacheTests.Model(), 100)
            }
        }
        let loads = await cache.loads
        #expect(await Self.keys(cache) == ["large"] && loads == 1)
        // Once the large one is idle it makes room.
        await cache.release("large", retention: .lingering, owner: SessionOwner(token: 1), uid: 1000)
        _ = try await cache.acquire("small", family: "small", estimate: 100) { (ModelCacheTests.Model(), 100) }
        #expect(await Self.keys(cache) == ["small"])
    }

    @Test func whatAFamilyTookLastIsWhatItsNextLoadIsExpectedToTake() async throws {
        let cache = ModelCache(lingerSeconds: 300, clock: ManualClock(), memoryBudget: 500)
        // The estimate (50) was low: base really takes 200 once loaded.
        _ = try await cache.acquire("base/en", family: "base", estimate: 50) { (ModelCacheTests.Model(), 200) }
        _ = try await cache.acquire("base/de", family: "base", estimate: 50) { (ModelCacheTests.Model(), 200) }
        // A third copy is expected to take 200, not 50: 600 > 500 with both in use.
        await #expect(throws: SpeechError.modelMemory(needed: 200, budget: 500, inUse: 400)) {
            _ = try await cache.acquire("base/fr", family: "base", estimate: 50) { (ModelCacheTests.Model(), 200) }
        }
    }
}
