@testable import EarshotSpeech
import Foundation
import Synchronization
import Testing

/// The shared model cache's retention, with an injected clock and a stand-in model.
@Suite struct ModelCacheTests {
    struct Model: SegmentTranscribing {
        func transcribe(_ samples: [Float], sampleRate: Int) throws -> Transcription { Transcription(text: "") }
    }

    final class Clock: Sendable {
        private let time = Mutex(1000.0)
        func now() -> Double { time.withLock { $0 } }
        func advance(_ seconds: Double) { time.withLock { $0 += seconds } }
    }

    static func loadedKeys(_ cache: ModelCache) async -> [String] { await cache.loaded.map(\.key) }

    /// Issue 8, defect 13: `end-retention` from one user unloaded every user's lingering models.
    @Test func endRetentionDropsOnlyTheCallersRetention() async throws {
        let clock = Clock()
        let cache = ModelCache(lingerSeconds: 300, now: { clock.now() })
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
        let clock = Clock()
        let cache = ModelCache(lingerSeconds: 300, now: { clock.now() })
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
}
