import EarshotCommandLine
import Foundation
import Testing
import TestSupport

/// `earshot transcribe` output formats and live mode, against the suite's daemon.
@Suite(.serialized, .speechDaemon(modules: ["dictation"]))
struct SpeechCommandLineTests {
    static func earshot(_ arguments: [String], stdin: FileHandle? = nil) async throws -> (status: Int32, stdout: String, stderr: String) {
        let daemon = try SpeechDaemon.shared()
        let child = try ChildProcess(BuiltProducts.path("earshot"), ["--socket", daemon.socket] + arguments, in: daemon.directory, stdin: stdin)
        let status = try #require(await child.wait(timeout: .seconds(120)), "earshot did not finish")
        return (status, child.stdout, child.stderr)
    }

    @Test func subtitlesCarryTheSegmentTimes() async throws {
        let file = SpeechFixtures.path(SpeechFixtures.ids[4])
        let srt = try await Self.earshot(["transcribe", "--module", "dictation", "--srt", file])
        #expect(srt.status == 0, "\(srt.stderr)")
        let lines = srt.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "1")
        #expect(lines.count >= 3 && lines[1].range(of: #"^\d\d:\d\d:\d\d,\d{3} --> \d\d:\d\d:\d\d,\d{3}$"#, options: .regularExpression) != nil)
        #expect(srt.stdout.lowercased().contains("might even"))
        let vtt = try await Self.earshot(["transcribe", "--module", "dictation", "--vtt", file])
        #expect(vtt.stdout.hasPrefix("WEBVTT\n\n"))
        #expect(vtt.stdout.range(of: #"\d\d:\d\d:\d\d\.\d{3} --> "#, options: .regularExpression) != nil)
    }

    @Test func liveReadsRawPCMFromStdinAsItArrives() async throws {
        // goforward.raw: 16 kHz s16le mono, "go forward ten meters", then a second of silence.
        let dir = try TempDirectory()
        defer { dir.remove() }
        var audio = try Data(contentsOf: URL(fileURLWithPath: "/usr/share/pocketsphinx/test/data/goforward.raw"))
        audio.append(Data(count: 32000))
        let input = dir.file("live.raw")
        try audio.write(to: URL(fileURLWithPath: input))
        let live = try await Self.earshot(["transcribe", "--live", "--module", "dictation"], stdin: FileHandle(forReadingAtPath: input))
        #expect(live.status == 0, "\(live.stderr)")
        let words = WordErrorRate.words(live.stdout)
        #expect(words.contains("go") && words.contains("forward"))
    }

    @Test func missingFilesAreAClearErrorPerFile() async throws {
        let run = try await Self.earshot(["transcribe", "--module", "dictation", "/nonexistent/audio.wav"])
        #expect(run.status == 1)
        #expect(run.stderr.contains("/nonexistent/audio.wav"))
        #expect(run.stderr.contains("cannot read audio"))
    }

    @Test func timestampsFormatBothWays() {
        #expect(TranscriptFormatter.timestamp(3723.456, comma: true) == "01:02:03,456")
        #expect(TranscriptFormatter.timestamp(0.0005, comma: false) == "00:00:00.001")
        let segments = [TranscriptSegment(start: 0, end: 1.5, text: "hello"), TranscriptSegment(start: 2, end: 3, text: "")]
        #expect(TranscriptFormatter.srt(segments) == "1\n00:00:00,000 --> 00:00:01,500\nhello\n")
        #expect(TranscriptFormatter.text(segments) == "hello")
    }

    @Test func subtitleCuesAreCutOnWordTimes() {
        typealias Word = TranscriptSegment.Word
        // 12 s of speech in one segment: two sentences, the second longer than one cue may be.
        let words = ["It", "was", "late.", "The", "rain", "kept", "falling", "on", "the", "old", "roofs", "of", "the", "sleeping", "town", "all", "night."]
        let timed = words.enumerated().map { index, text in Word(text: text, start: Double(index) * 0.7, end: Double(index) * 0.7 + 0.5, confidence: nil) }
        let segment = TranscriptSegment(start: 0, end: 12, text: words.joined(separator: " "), words: timed)
        let untimed = TranscriptSegment(start: 12, end: 14, text: "no word times")
        let cues = TranscriptFormatter.cues([segment, untimed])
        #expect(cues.map(\.text) == ["It was late.", "The rain kept falling on the old roofs", "of the sleeping town all night.", "no word times"])
        // Each cue spans its words exactly, at most 6 s; the segment without word times is one cue.
        #expect(cues[0].start == 0 && abs(cues[0].end - 1.9) < 1e-9)
        #expect(abs(cues[1].start - 2.1) < 1e-9 && abs(cues[1].end - (10 * 0.7 + 0.5)) < 1e-9)
        #expect(cues.dropLast().allSatisfy { $0.end - $0.start <= 6 })
        #expect(cues[3].start == 12 && cues[3].end == 14)
        #expect(TranscriptFormatter.vtt([segment]).hasPrefix("WEBVTT\n\n00:00:00.000 --> 00:00:01.900\nIt was late.\n\n00:00:02.100 --> "))
        // A cue never outgrows the character limit either.
        let long = (0..<40).map { Word(text: "word\($0)", start: Double($0) * 0.1, end: Double($0) * 0.1 + 0.05, confidence: nil) }
        let dense = TranscriptFormatter.cues([TranscriptSegment(start: 0, end: 4, text: long.map(\.text).joined(separator: " "), words: long)])
        #expect(dense.count > 1 && dense.allSatisfy { $0.text.count <= 84 })
    }
}
