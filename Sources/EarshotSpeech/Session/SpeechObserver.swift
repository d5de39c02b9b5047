import Dispatch
import EarshotWire

/// What the speech service reports as engines work, for whoever counts it (the daemon's
/// metrics). Called on the sessions' own decode threads: implementations must not block.
public protocol SpeechObserver: Sendable {
    /// `engine` decoded `audioSeconds` of audio in `computeSeconds` of its own work (one Whisper
    /// segment or one PocketSphinx utterance; time waiting for a decode slot is not counted).
    func decoded(engine: String, audioSeconds: Double, computeSeconds: Double)
    /// Session `session`'s transcriber gave no text for the speech the detector found in `range`
    /// (stream time), even decoded again (``WindowTranscript``); its results there carry
    /// `speech_without_text`.
    func speechWithoutText(session: String, range: WireTimeRange)
}

/// Seconds since `start` on the monotonic clock.
func secondsSince(_ start: DispatchTime) -> Double {
    Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
}

/// A session's streaming decoder that tells the observer what each utterance cost: the time spent
/// in the decoder from the utterance's start to its end, against the audio it was given.
/// (Unchecked Sendable: owned by one session and used only on its queue, like the decoder.)
final class MeteredDecoder: StreamingDecoding, @unchecked Sendable {
    /// The decoder it meters.
    let decoder: any StreamingDecoding
    private let engine: String
    private let observer: any SpeechObserver
    private var samples = 0
    private var compute = 0.0

    init(_ decoder: any StreamingDecoding, engine: String, observer: any SpeechObserver) {
        self.decoder = decoder
        self.engine = engine
        self.observer = observer
    }

    private func timed<T>(_ work: () throws -> T) rethrows -> T {
        let start = DispatchTime.now()
        defer { compute += secondsSince(start) }
        return try work()
    }

    private func report(samples count: Int, compute seconds: Double) {
        guard count > 0 else { return }
        observer.decoded(engine: engine, audioSeconds: Double(count) / Double(AnalysisSession.sampleRate), computeSeconds: seconds)
    }

    func startUtterance() throws {
        (samples, compute) = (0, 0)
        try timed { try decoder.startUtterance() }
    }

    func process(_ samples: [Float]) throws {
        self.samples += samples.count
        try timed { try decoder.process(samples) }
    }

    func partial() -> Transcription? { timed { decoder.partial() } }

    func endUtterance(alternatives: Int) throws -> Transcription {
        defer {
            report(samples: samples, compute: compute)
            (samples, compute) = (0, 0)
        }
        return try timed { try decoder.endUtterance(alternatives: alternatives) }
    }

    func decodeWhole(_ samples: [Float], alternatives: Int) throws -> Transcription {
        let start = DispatchTime.now()
        let transcription = try decoder.decodeWhole(samples, alternatives: alternatives)
        report(samples: samples.count, compute: secondsSince(start))
        return transcription
    }
}
