import EarshotWire
import Foundation
import Testing
import TestSupport

/// The test client's own contract, which the benchmarks and every daemon test rely on.
@Suite struct TestConnectionTests {
    /// Regression (Benchmarks/speech.sh): cancelling the task that waited for a frame ended the
    /// stream's iterator, so `next` returned nil as for a closed connection, and speech-bench's
    /// stats sampler, cancelled at the end of a concurrent run, failed the benchmark with "the
    /// daemon closed the connection" now and then.
    @Test func aCancelledWaitThrowsCancellationErrorWhileAClosedConnectionGivesNil() async throws {
        let daemon = try await TestDaemon()
        let connection = try TestConnection(daemon.socket)
        defer { connection.close() }
        let waiting = Task { try await connection.next(timeout: .seconds(60)) }
        await Task.yield()
        waiting.cancel()
        await #expect(throws: CancellationError.self) { _ = try await waiting.value }

        // The daemon closes a connection whose first frame is not a frame: that is nil.
        let closed = try TestConnection(daemon.socket)
        defer { closed.close() }
        try closed.sendRaw(Array(String(repeating: "x", count: 70_000).utf8) + [0x0A])
        var frame: Frame?
        repeat { frame = try await closed.next(timeout: .seconds(10)) } while frame != nil && frame?.type == ErrorEvent.eventType
        #expect(frame == nil)
        await daemon.cleanUp()
    }
}
