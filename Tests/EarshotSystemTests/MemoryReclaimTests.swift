import EarshotSystem
import Foundation
import Testing

/// The CI failure of `wyomingASRLeaksMemory` (resident memory 196 → 329 MiB over eight
/// PocketSphinx sessions): freed engine memory stayed in glibc's per-thread arenas. A reclaim after
/// release gives it back, and the anonymous/file split reports it.
@Suite(.serialized)
struct MemoryReclaimTests {
    @Test func residentMemoryIsSplitByBacking() {
        let memory = ProcessFacts.residentMemory()
        #expect(memory.anonymousBytes > 0)
        #expect(memory.fileBytes > 0, "the test binary's own pages are file-backed")
        #expect(memory.anonymousBytes + memory.fileBytes <= ProcessFacts.residentBytes() + (16 << 20))
    }

    @Test func freedEngineMemoryRatchetsUpWithoutAReclaim() async throws {
        let before = ProcessFacts.residentMemory().anonymousBytes
        // 128 MiB in 1 KiB blocks on another thread (its own arena, as an engine's loader thread),
        // every 64th block kept so the freed ones cannot coalesce into a trimmable top.
        let kept = await Self.onThread { () -> [UInt] in
            var blocks: [UnsafeMutableRawPointer] = []
            for _ in 0..<(128 << 10) {
                let block = malloc(1024)!
                memset(block, 1, 1024)
                blocks.append(block)
            }
            var kept: [UInt] = []
            for (index, block) in blocks.enumerated() { if index % 64 == 0 { kept.append(UInt(bitPattern: block)) } else { free(block) } }
            return kept
        }
        defer { kept.forEach { free(UnsafeMutableRawPointer(bitPattern: $0)) } }
        let freed = ProcessFacts.residentMemory().anonymousBytes
        MemoryReclaim.afterRelease()
        await MemoryReclaim.settled()
        let reclaimed = ProcessFacts.residentMemory().anonymousBytes
        print("[reclaim] anonymous MiB: before \(before >> 20), after free \(freed >> 20), after reclaim \(reclaimed >> 20)")
        #expect(reclaimed - before < 32 << 20, "freed memory was not given back: \(reclaimed >> 20) MiB anonymous (from \(before >> 20))")
    }

    private static func onThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { done in Thread { done.resume(returning: work()) }.start() }
    }
}
