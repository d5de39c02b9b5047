import Dispatch
import Foundation

/// Bounds a session's segment decodes: at most `lanes` at once, each on its own lane (a serial
/// queue, so a blocked decode never holds a thread of a shared pool), holding at most `maxSamples`
/// of audio between those in flight and those reserved (a recording's window being gathered; one
/// decode is always admitted). `reserve` and `run` block: call them on the session's queue, never
/// the cooperative pool.
final class DecodeWindow: @unchecked Sendable {
    // Unchecked: state is guarded by `condition`; the queues are thread-safe.
    private let condition = NSCondition()
    private let queues: [DispatchQueue]
    private let maxSamples: Int
    private var free: [Int]
    private var heldSamples = 0

    init(label: String, lanes: Int, maxSamples: Int) {
        queues = (0..<max(1, lanes)).map { DispatchQueue(label: "\(label).\($0)") }
        free = Array(queues.indices.reversed())
        self.maxSamples = maxSamples
    }

    /// Waits until `samples` more fit within `maxSamples` (or nothing is held), then holds them
    /// for a decode to come: ``run(reserved:_:)`` runs it, ``unreserve(samples:)`` drops it.
    func reserve(samples: Int) {
        condition.withLock {
            while heldSamples > 0 && heldSamples + samples > maxSamples { condition.wait() }
            heldSamples += samples
        }
    }

    /// Waits for a lane, then runs `work` on it (its samples reserved); `work` must call `release`
    /// when its decode is done.
    func run(reserved samples: Int, _ work: @escaping @Sendable (_ lane: Int) -> Void) {
        let lane = condition.withLock {
            while free.isEmpty { condition.wait() }
            return free.removeLast()
        }
        queues[lane].async { work(lane) }
    }

    /// Waits for a lane, then transcribes `samples` (reserved) with `model` on it, gives the lane
    /// and the samples back and hands `done` the outcome, on the lane.
    func transcribe(_ samples: [Float], with model: any SegmentTranscribing,
                    then done: @escaping @Sendable (Result<Transcription, any Error>) -> Void) {
        perform(reserved: samples.count, { try model.transcribe(samples, sampleRate: Int(AnalysisSession.sampleRate)) }, then: done)
    }

    /// Waits for a lane, then runs `work` (decodes of `samples` reserved samples) on it, gives the
    /// lane and the samples back and hands `done` the outcome, on the lane.
    func perform<T: Sendable>(reserved samples: Int, _ work: @escaping @Sendable () throws -> T,
                              then done: @escaping @Sendable (Result<T, any Error>) -> Void) {
        run(reserved: samples) { [self] lane in
            let outcome = Result { try work() }
            release(lane: lane, samples: samples)
            done(outcome)
        }
    }

    func release(lane: Int, samples: Int) {
        condition.withLock {
            free.append(lane)
            heldSamples -= samples
            condition.broadcast()
        }
    }

    /// Gives back samples reserved for a decode that will not run.
    func unreserve(samples: Int) {
        condition.withLock {
            heldSamples -= samples
            condition.broadcast()
        }
    }

    /// Audio samples held by decodes in flight and reserved for coming ones.
    var samples: Int { condition.withLock { heldSamples } }
}
