import EarshotSpeech
import EarshotWire
import Foundation

/// What the speech service reports as it works: counted in the metrics, and logged where an admin
/// must hear of it (speech that came back without text).
struct SpeechReports: SpeechObserver {
    let metrics: DaemonMetrics
    let logger: Logger

    func decoded(engine: String, audioSeconds: Double, computeSeconds: Double) {
        metrics.decoded(engine: engine, audioSeconds: audioSeconds, computeSeconds: computeSeconds)
    }

    func speechWithoutText(session: String, range: WireTimeRange) {
        let (start, end) = (range.start.seconds, range.end.seconds)
        metrics.lostSpeech(seconds: max(0, end - start))
        logger.warning(String(format: "no text for speech at %.1f–%.1f s", start, end),
                       ["session": session, "speech_start": String(format: "%.3f", start), "speech_end": String(format: "%.3f", end)])
    }
}
