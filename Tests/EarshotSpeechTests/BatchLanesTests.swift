@testable import EarshotSpeech
import EarshotWire
import Foundation
import Testing

/// A session's overlapping Whisper decodes move to a single-threaded copy of the model (issue 10:
/// two decodes sharing one 2-thread ONNX Runtime pool were ~1.3x slower on 2 cores than two
/// 1-thread decodes), while lone decodes keep the session's multi-threaded model.
@Suite struct BatchLanesTests {
    /// A stand-in model that answers with its name.
    struct Named: SegmentTranscribing {
        let name: String
        func transcribe(_ samples: [Float], sampleRate: Int, settings: DecodeSettings) throws -> Transcription { Transcription(text: name) }
    }

    /// Counts acquisitions and releases; an acquisition can be held until `proceed()`.
    final class Ledger: @unchecked Sendable {
        private let lock = NSLock()
        private var counts = (acquired: 0, released: 0)
        private let held: DispatchSemaphore?
        init(holdingAcquisition: Bool = false) { held = holdingAcquisition ? DispatchSemaphore(value: 0) : nil }
        var acquired: Int { lock.withLock { counts.acquired } }
        var released: Int { lock.withLock { counts.released } }
        func proceed() { held?.signal() }

        func lanes() -> BatchLanes {
            BatchLanes(acquire: { [self] in
                if let held { await Task.detached { held.wait() }.value }
                lock.withLock { counts.acquired += 1 }
                return Named(name: "copy")
            }, release: { [self] in lock.withLock { counts.released += 1 } })
        }
    }

    static func name(_ model: (any SegmentTranscribing)?) throws -> String? {
        try model?.transcribe([], sampleRate: 16000).text
    }

    @Test func loneDecodesKeepTheSessionsModelAndOverlappingOnesMoveToTheCopy() async throws {
        let ledger = Ledger()
        let lanes = ledger.lanes()
        // One decode at a time, however many: nothing is loaded.
        for _ in 0..<3 {
            #expect(try Self.name(lanes.begin()) == nil)
            lanes.end()
        }
        await lanes.settled()
        #expect(ledger.acquired == 0)

        // Two at once: the second starts the copy's load and, until it is ready, both go on with
        // the session's model.
        #expect(try Self.name(lanes.begin()) == nil)
        #expect(try Self.name(lanes.begin()) == nil)
        await lanes.settled()
        #expect(ledger.acquired == 1)
        lanes.end()
        lanes.end()
        // From then on every decode of the session uses the copy, a lone one too.
        #expect(try Self.name(lanes.begin()) == "copy")
        #expect(try Self.name(lanes.begin()) == "copy")
        lanes.end()
        lanes.end()
        #expect(ledger.acquired == 1, "loaded once")

        await lanes.close()
        #expect(ledger.released == 1)
        await lanes.close()
        #expect(ledger.released == 1, "released once")
    }

    @Test func aCopyStillLoadingWhenTheSessionEndsIsGivenBackOnceLoaded() async throws {
        let ledger = Ledger(holdingAcquisition: true)
        let lanes = ledger.lanes()
        _ = lanes.begin()
        _ = lanes.begin()
        lanes.end()
        lanes.end()
        let closing = Task { await lanes.close() }
        ledger.proceed()
        await closing.value
        #expect(ledger.acquired == 1 && ledger.released == 1)
        // After the session, nothing is loaded again.
        _ = lanes.begin()
        _ = lanes.begin()
        await lanes.settled()
        #expect(ledger.acquired == 1)
    }

    @Test func aSessionThatNeverOverlapsReleasesNothing() async {
        let ledger = Ledger()
        let lanes = ledger.lanes()
        _ = lanes.begin()
        lanes.end()
        await lanes.close()
        #expect(ledger.acquired == 0 && ledger.released == 0)
    }
}
