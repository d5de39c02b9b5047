@testable import EarshotSpeech
import Foundation
import Testing
import TestSupport

/// The shared model cache's retention, with an injected clock and a stand-in model.
@Suite struct ModelCacheTests {
    struct Model: SegmentTranscribing {
        func transcribe(_ samples: [Float], sampleRate: Int) throws -> Transcription { Transcription(text: "") }
    }

    static func loadedKeys(_ cache: ModelCache) async -> [String] { await cache.loaded.map(\.key) }

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
    /// (it used to poll once a real second).
    @Test func evictorUnloadsAtExactlyTheLingerTime() async throws {
        let clock = ManualClock()
        let cache = ModelCache(lingerSeconds: 300, clock: clock)
        let evictor = Task { await cache.runEvictor() }
        defer { evictor.cancel() }
        _ = try await cache.acquire("m") { (Model(), 1) }
        await cache.release("m", retention: .lingering, owner: 1, uid: 1000)
        await clock.sleepers(atLeast: 1)
        #expect(clock.requestedSleeps.last == .seconds(300), "the evictor sleeps until the deadline")
        clock.advance(by: .seconds(300) - .nanoseconds(1))
        #expect(await Self.loadedKeys(cache) == ["m"], "one nanosecond early it stays")
        clock.advance(by: .nanoseconds(1))
        #expect(await Self.eventuallyUnloaded(cache), "unloaded at 300 s")
        evictor.cancel()
        await evictor.value
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
