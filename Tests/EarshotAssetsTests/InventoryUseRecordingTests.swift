@testable import EarshotAssets
import EarshotWire
import Foundation
import Testing
import TestSupport

/// How a session's use of assets and reservations reaches the state database (``DeferredUses``).
@Suite("Inventory: recording use")
struct InventoryUseRecordingTests {
    /// Regression (issue 10): opening a session waited for the commits recording its use — three
    /// SQLite transactions, each ending in `fdatasync`, before the first audio of every
    /// `earshot transcribe`. With the database held busy, recording a use now returns at once;
    /// the use is written once the database is free, and listings show it.
    @Test func recordingAUseDoesNotWaitForTheStateDatabase() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        try await fixture.withService { handle async throws in
            let service = handle.service
            let english = Modules.transcriber("en-US")
            _ = try await service.install([english], for: appA) { _ in }
            fixture.clock.advance(50)

            // Hold the database queue until released (or, if recording the use waited for it, 30 s).
            let database = await service.database
            let release = DispatchSemaphore(value: 0)
            let (entered, enteredSignal) = AsyncStream.makeStream(of: Void.self)
            let holder = Task {
                try await database.read { _ in
                    enteredSignal.yield()
                    return release.wait(timeout: .now() + 30) == .success
                }
            }
            for await _ in entered { break }

            await service.noteUse(of: [english], by: appA)
            release.signal()
            #expect(try await holder.value, "noteUse returned only after the database was free")
            #expect(try await service.reservations(of: appA).map(\.lastUsed) == [fixture.clock.wallTime()])
        }
    }

    /// The uses of a session that ends right before the service stops (its writes in the
    /// background, `shutdown()` writing what is pending) are there for the next service.
    @Test func usesRecordedJustBeforeShutdownSurviveARestart() async throws {
        let fixture = try await InventoryFixture.make()
        defer { fixture.remove() }
        try await fixture.publishStandardCatalog()
        let english = Modules.transcriber("en-US")
        try await fixture.withService { handle async throws in
            let service = handle.service
            _ = try await service.install([english], for: appA) { _ in }
            fixture.clock.advance(70)
            let lease = try await service.lease(english)
            await service.noteUse(of: [english], by: appA)
            await service.endLease(lease)
        }
        try await fixture.withService(running: false) { handle async throws in
            #expect(try await handle.service.installedAssets().first { $0.entry.id == "tx-en" }?.lastUsed == fixture.clock.wallTime())
            #expect(try await handle.service.reservations(of: appA).map(\.lastUsed) == [fixture.clock.wallTime()])
        }
    }
}
