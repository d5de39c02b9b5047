@testable import EarshotDaemon
import EarshotHTTP
import EarshotTranscript
import EarshotWire
import Foundation
import Testing

/// Issue 26: speech that came back without text is counted in `/metrics`, listed (flagged) in
/// OpenAI's `verbose_json` and in `earshot transcribe --json`, never dropped as silence.
struct SpeechWithoutTextReportTests {
    @Test func lostSpeechIsCountedWithItsSeconds() {
        let metrics = DaemonMetrics()
        let reports = SpeechReports(metrics: metrics, logger: Logger(minimum: .error, environment: [:]))
        #expect(metrics.registry.exposition().contains("earshot_speech_without_text_total 0"))
        let range = WireTimeRange(start: WireTime(value: 25_600, timescale: 1000), end: WireTime(value: 42_000, timescale: 1000))
        reports.speechWithoutText(session: "s1", range: range)
        let exposition = metrics.registry.exposition()
        #expect(exposition.contains("earshot_speech_without_text_total 1"))
        #expect(exposition.contains("earshot_speech_without_text_seconds_total 16.4"))
    }

    @Test func aSegmentWithoutTextIsListedAndFlaggedInVerboseJSONAndTheCLIsJSON() throws {
        let result = AnalyzerResult(session: "s1", module: 0, range: WireTimeRange(start: .zero, end: WireTime(value: 8, timescale: 1)),
                                    finalizationTime: WireTime(value: 8, timescale: 1), isFinal: true, runs: [], speechWithoutText: true)
        let lost = TranscriptSegment(result)
        let heard = TranscriptSegment(start: 8, end: 10, text: "It was the spring of hope.")
        let cli = String(decoding: try JSONEncoder().encode([lost, heard]), as: UTF8.self)
        #expect(cli.contains("\"speech_without_text\":true"))
        #expect(cli.components(separatedBy: "speech_without_text").count == 2, "only the lost segment carries the key")
        // The CLI says each stretch of them on stderr, consecutive segments as one.
        let second = TranscriptSegment(start: 8, end: 9, text: "", speechWithoutText: true)
        let stretches = TranscriptFormatter.speechWithoutText([lost, second, heard, second])
        #expect(stretches.map(\.start) == [0, 8] && stretches.map(\.end) == [9, 9])

        let parameters = OpenAITranscription.Parameters(file: HTTPFormFile(filename: "a.wav", contentType: nil, data: Data()), model: "whisper-1",
                                                        language: nil, format: .verboseJSON, words: false, segments: true, stream: false, ignored: [:])
        let response = OpenAITranscription.render([lost, heard], duration: 10, parameters: parameters, translate: false)
        guard case .bytes(let body) = response.body else { Issue.record("a streamed body"); return }
        let document = try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
        let segments = try #require(document["segments"] as? [[String: Any]])
        #expect(segments.count == 2)
        #expect(segments[0]["text"] as? String == "" && segments[0]["speech_without_text"] as? Bool == true)
        #expect(segments[1]["speech_without_text"] == nil)
        #expect(document["text"] as? String == "It was the spring of hope.")
    }
}
