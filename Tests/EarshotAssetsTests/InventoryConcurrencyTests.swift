@testable import EarshotAssets
import EarshotWire
import Foundation
import Testing
import TestSupport

/// The critical sections of `AssetService` that span `await` (GC, install decisions, leases,
/// catalog refreshes) under the async lock, and the lock itself.
@Suite("Inventory: concurrent GC, installs and leases")
struct InventoryConcurrencyTests {
    /// GC decided what to delete, awaited the database, then deleted: a lease (or an install that
    /// found the asset installed) running in between was left holding a deleted tree. The test
    /// holds the service's lock where a GC would, between its decision and its deletion.
    @Test("a GC running concurrently with a lease or an install cannot delete what they hold")
    func gcConcurrentWithLeaseAndInstallKeepsWhatTheyHold() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        try await fixture.withService { handle async throws in
            let service = handle.service
            let english = Modules.transcriber("en-US")
            _ = try await service.install([english], for: appA) { _ in }
            #expect(try await service.release("en-US", for: appA))
            let doomed = try await service.installedAssets()

            // A GC has decided to remove tx-en@1 (nothing reserves or leases it).
            await service.gate.acquire()
            let finished = OrderLog()
            let lease = Task {
                defer { finished.append("lease") }
                return try await service.lease(english)
            }
            let install = Task {
                defer { finished.append("install") }
                return try await service.install([english], for: appB) { _ in }
            }
            #expect(await Self.queue(2, on: service.gate, unless: { !finished.all.isEmpty }),
                    "a lease and an install went ahead in the middle of a GC")
            try await service.remove(doomed)
            await service.gate.release()

            // The lease came after the removal: nothing to lease, no deleted tree handed out.
            let refused = await #expect(throws: AssetError.self) { try await lease.value }
            #expect(refused?.caseName == "notInstalled")
            // The install came after it too: it installed the asset again instead of counting on
            // the removed copy.
            let outcome = try await install.value
            #expect(!outcome.nothingToDo && outcome.installed == ["tx-en@1"])
            #expect(fixture.exists(fixture.assetsDirectory + "/tx-en/1"))

            // And a real GC waits for the lock as well.
            await service.gate.acquire()
            let gc = Task {
                defer { finished.append("gc") }
                return try await service.collectGarbage(dryRun: false)
            }
            #expect(await Self.queue(1, on: service.gate, unless: { finished.all.contains("gc") }), "a GC ran while the lock was held")
            await service.gate.release()
            _ = try await gc.value
        }
    }

    /// Yields until `count` tasks wait on `lock`; false if `finished` says one went ahead instead.
    static func queue(_ count: Int, on lock: AsyncLock, unless finished: () -> Bool) async -> Bool {
        for _ in 0..<100_000 {
            if finished() { return false }
            if await lock.waiting >= count { return true }
            await Task.yield()
        }
        return false
    }

    /// The periodic GC slept with `Task.sleep` in real time; it sleeps on the injected clock.
    @Test("the GC loop runs every GCInterval of the injected clock")
    func gcLoopFollowsTheManualClock() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        try await fixture.withService { handle async throws in
            let service = handle.service
            _ = try await service.install([Modules.transcriber("en-US")], for: appA) { _ in }
            #expect(try await service.release("en-US", for: appA))
            await fixture.clock.sleepers(atLeast: 1)
            #expect(fixture.clock.requestedSleeps == [.seconds(3600)])
            #expect(try await service.installedAssets().first?.unneededSince == nil, "no GC before the interval")
            fixture.clock.advance(by: .seconds(3600))
            #expect(try await eventually { try await service.installedAssets().first?.unneededSince == fixture.clock.wallTime() }, "the GC ran and marked the asset")
            await fixture.clock.sleepers(atLeast: 1)
            #expect(fixture.clock.requestedSleeps == [.seconds(3600), .seconds(3600)], "and sleeps for the next interval")
        }
    }

    @Test("the async lock admits one holder at a time across suspensions, in arrival order")
    func asyncLockIsExclusiveAndFIFO() async throws {
        let lock = AsyncLock()
        let order = OrderLog()
        await lock.acquire()
        var tasks: [Task<Void, Never>] = []
        for index in 0..<5 {
            tasks.append(Task {
                await lock.acquire()
                order.append("enter \(index)")
                await Task.yield()
                order.append("leave \(index)")
                await lock.release()
            })
            // Each task queues before the next starts (arrival order is the test's).
            while await lock.waiting < index + 1 { await Task.yield() }
        }
        #expect(order.all.isEmpty, "nobody enters while the lock is held")
        await lock.release()
        for task in tasks { await task.value }
        #expect(order.all == (0..<5).flatMap { ["enter \($0)", "leave \($0)"] })
        #expect(await lock.waiting == 0)
    }
}

/// Lines appended from several tasks.
final class OrderLog: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.withLock { lines.append(line) } }
    var all: [String] { lock.withLock { lines } }
}
