import EarshotWire
import Foundation
import Testing
import TestSupport

/// The seed's silent failures over the raw `earshot.analyzer.*` protocol against the real daemon:
/// last words kept, exact last sample times, empty sessions, discontiguous input, cancel-before,
/// errors that finish a session, volatile results only when asked for.
@Suite(.serialized, .speechDaemon())
struct SpeechSessionTests {
    static let short = SpeechFixtures.ids[1] // "he was not an ill disposed young man" (3 s)
    static let last = SpeechFixtures.ids[4] // "he might even have been made amiable himself" (3.3 s)
    static let long = SpeechFixtures.ids[0] // "and mister john dashwood had then leisure …" (7.1 s)

    static func engines() -> [ModuleConfiguration] {
        SpeechFixtures.whisperAvailable ? [SpeechFixtures.dictation(), SpeechFixtures.transcriber()] : [SpeechFixtures.dictation()]
    }

    /// Audio that ends right after "man" (no trailing silence), finished with `finalizeThrough` at
    /// its last sample time: the final result still holds the last word.
    @Test(arguments: engines())
    func stoppingRightAfterTheLastWordKeepsIt(module: ModuleConfiguration) async throws {
        let daemon = try SpeechDaemon.shared()
        let clip = try SpeechFixtures.samples(Self.short)
        let cut = min(clip.count, SpeechFixtures.endOfSpeech(clip) + SpeechFixtures.rate / 50)
        #expect(cut < clip.count - SpeechFixtures.rate / 10, "the clip should have trailing silence to cut")
        let client = try TestConnection(daemon.socket)
        defer { client.close() }
        var session = try await WireSession.opened(client, [module])
        try await session.send(clip[..<cut])
        let end = SpeechFixtures.time(samples: cut)
        let done = try await session.finish(.finalizeThrough, time: end)
        #expect(done.lastSampleTime == end)
        #expect(session.finished?.error == nil)
        let text = session.finalText()
        print("[last word, \(module.kind.rawValue)] cut at \(Double(cut) / 16000) s: \(text)")
        let words = SpeechFixtures.words(text)
        #expect(words.last == "man", "the last word is lost: '\(text)'")
        #expect(SpeechFixtures.inOrder(["was", "young", "man"], in: words).ok)
        #expect(session.finals().allSatisfy { $0.range.end <= end })
    }

    /// `analyzeSequence`'s return value: the control result's last sample time is the exact time after
    /// the last sample, also with odd chunk sizes and a start that is not a whole sample.
    @Test func lastSampleTimeIsExact() async throws {
        let daemon = try SpeechDaemon.shared()
        let clip = try SpeechFixtures.samples(Self.short)
        let client = try TestConnection(daemon.socket)
        defer { client.close() }
        var session = try await WireSession.opened(client, [SpeechFixtures.dictation()])
        let count = 12_345
        try await session.send(clip[..<count], chunk: 4_999)
        #expect(try await session.control("finalize").lastSampleTime == WireTime(value: 12_345, timescale: 16_000))
        // Continue at 7/3 s: the timeline is exact rational arithmetic (timescale 48000).
        let start = WireTime(value: 7, timescale: 3)
        try await session.send(clip[count..<(count + 1_001)], start: start, chunk: 333)
        let expected = WireTime(value: 7 * 16_000 + 3 * 1_001, timescale: 48_000)
        let done = try await session.finish(.finalizeThroughEndOfInput)
        #expect(done.lastSampleTime == expected, "\(String(describing: done.lastSampleTime)) != \(expected)")
        #expect(session.finished?.error == nil)
    }

    /// Sessions that never got audio end at once, whichever way they finish.
    @Test(arguments: [FinishMode.cancelNow, .finalizeThroughEndOfInput])
    func emptySessionFinishes(mode: FinishMode) async throws {
        let daemon = try SpeechDaemon.shared()
        let client = try TestConnection(daemon.socket)
        defer { client.close() }
        var session = try await WireSession.opened(client, [SpeechFixtures.dictation()])
        let done = try await session.finish(mode, timeout: .seconds(10))
        #expect(done.lastSampleTime == nil)
        #expect(session.finished?.error == nil)
        #expect(session.finals().allSatisfy { $0.text.isEmpty })
        let monitor = try TestConnection(daemon.socket)
        defer { monitor.close() }
        #expect(try await monitor.pollStats { $0.sessions == 0 }.sessions == 0)
    }

    /// Two utterances placed at 10 s and 30 s: results sit at those times.
    @Test(arguments: engines())
    func discontiguousInputKeepsItsTimes(module: ModuleConfiguration) async throws {
        let daemon = try SpeechDaemon.shared()
        let first = try SpeechFixtures.samples(Self.short), second = try SpeechFixtures.samples(Self.last)
        let client = try TestConnection(daemon.socket)
        defer { client.close() }
        var session = try await WireSession.opened(client, [module])
        let at10 = WireTime(value: 10, timescale: 1), at30 = WireTime(value: 30, timescale: 1)
        try await session.send(first, start: at10)
        try await session.send(second, start: at30)
        let done = try await session.finish()
        #expect(done.lastSampleTime == at30 + SpeechFixtures.time(samples: second.count))
        let windows = [(at10, at10 + SpeechFixtures.time(samples: first.count)), (at30, at30 + SpeechFixtures.time(samples: second.count))]
        var texts = ["", ""]
        for result in session.finals() where !result.text.isEmpty {
            let window = windows.firstIndex { result.range.start >= $0.0 && result.range.end <= $0.1 }
            #expect(window != nil, "result \(result.range) '\(result.text)' is outside both inputs")
            if let window { texts[window] += result.text + " " }
        }
        print("[discontiguous, \(module.kind.rawValue)] at 10 s: \(texts[0]) | at 30 s: \(texts[1])")
        #expect(SpeechFixtures.words(texts[0]).contains("young"))
        #expect(SpeechFixtures.words(texts[1]).contains("himself"))
    }

    /// `cancel-before T`, then audio from 0: what comes before T is not analysed (no words from
    /// it), what follows is, at its own times.
    @Test func cancelBeforeDropsEarlierAudio() async throws {
        let daemon = try SpeechDaemon.shared()
        let first = try SpeechFixtures.samples(Self.short), second = try SpeechFixtures.samples(Self.last)
        let client = try TestConnection(daemon.socket)
        defer { client.close() }
        let module = SpeechFixtures.whisperAvailable ? SpeechFixtures.transcriber() : SpeechFixtures.dictation()
        var session = try await WireSession.opened(client, [module])
        let cutoff = SpeechFixtures.time(samples: first.count)
        let cancel = try await session.control("cancel-before", time: cutoff)
        #expect(cancel.lastSampleTime == nil)
        try await session.send(first + second)
        let done = try await session.finish()
        #expect(done.lastSampleTime == SpeechFixtures.time(samples: first.count + second.count))
        let text = session.finalText()
        print("[cancel-before] \(text)")
        let words = Set(SpeechFixtures.words(text))
        #expect(words.isDisjoint(with: ["disposed", "young", "man"]), "audio before the cutoff was analysed: \(text)")
        #expect(words.contains("himself"))
        #expect(session.finals().allSatisfy { $0.text.isEmpty || $0.range.start >= cutoff })
    }

    /// A chunk in another format than the session's ends it with `unsupportedAudioFormat`.
    @Test func wrongAudioFormatFinishesTheSessionWithAnError() async throws {
        let daemon = try SpeechDaemon.shared()
        let client = try TestConnection(daemon.socket)
        defer { client.close() }
        var session = try await WireSession.opened(client, [SpeechFixtures.dictation()])
        let stereo = AudioFormatSpec(rate: 44_100, width: 2, channels: 2)
        try await client.send(AnalyzerAudio(session: session.id, format: stereo), payload: [UInt8](repeating: 0, count: 17_640))
        let finished = try await session.waitFinished(timeout: .seconds(10))
        #expect(finished.error?.code == .unsupportedAudioFormat)
        #expect(finished.error?.text.contains("44100") == true)
        let monitor = try TestConnection(daemon.socket)
        defer { monitor.close() }
        #expect(try await monitor.pollStats { $0.sessions == 0 }.sessions == 0)
    }

    /// Modules that cannot run are refused at open: unsupported locale, nothing installed.
    @Test func openRefusesModulesThatCannotRun() async throws {
        let daemon = try SpeechDaemon.shared()
        let client = try TestConnection(daemon.socket)
        defer { client.close() }
        let klingon = try await WireSession.open(client, [ModuleConfiguration(kind: .dictation, locale: "tlh")])
        #expect(klingon.error?.code == .unsupportedLocale)
        // A fresh daemon on the same catalog with nothing installed.
        let bare = try await TestDaemon()
        defer { Task { await bare.cleanUp() } }
        let other = try TestConnection(bare.socket)
        defer { other.close() }
        for module in [SpeechFixtures.dictation(), SpeechFixtures.transcriber()] {
            let refused = try await WireSession.open(other, [module])
            #expect(refused.error?.code == .notInstalled, "\(module.kind): \(String(describing: refused.error))")
        }
    }

    /// With `volatileResults` (progressive presets) volatile results come before the final one and
    /// the final result covers what they were about; without, only final results.
    @Test(arguments: engines())
    func volatileResultsOnlyWhenAskedFor(module: ModuleConfiguration) async throws {
        let daemon = try SpeechDaemon.shared()
        let clip = try SpeechFixtures.samples(Self.long)
        var progressive = module
        progressive.preset = module.kind == .dictation ? "progressiveLongDictation" : "progressiveTranscription"
        progressive.reportingOptions = ["volatileResults"]
        let client = try TestConnection(daemon.socket)
        defer { client.close() }

        var session = try await WireSession.opened(client, [progressive])
        try await session.send(clip, chunk: 1_600)
        try await session.finish()
        let results = session.results
        let firstFinal = try #require(results.firstIndex { $0.isFinal && !$0.text.isEmpty }, "no final result")
        let volatile = results[..<firstFinal].filter { !$0.isFinal }
        print("[volatile, \(module.kind.rawValue)] \(volatile.count) volatile before the first final: \(volatile.map(\.text).suffix(3)) → \(results[firstFinal].text)")
        #expect(volatile.count >= 2, "expected several volatile results during a 7 s utterance")
        #expect(session.volatileRanges.contains { $0 != nil })
        #expect(session.volatileRanges.last == .some(nil), "the volatile range must clear once everything is final")
        // Every volatile result is followed by final results covering its speech (same or greater range).
        let finals = results.filter(\.isFinal)
        for result in results where !result.isFinal {
            let later = finals.filter { $0.range.end > result.range.start }
            #expect(later.contains { $0.range.end >= result.range.end }, "volatile \(result.range) '\(result.text)' has no final result reaching its end")
        }
        let lastVolatile = try #require(volatile.last)
        let covering = try #require(finals.first { !$0.text.isEmpty && $0.range.end >= lastVolatile.range.end })
        print("[volatile, \(module.kind.rawValue)] last volatile \(lastVolatile.range.start.seconds)–\(lastVolatile.range.end.seconds) s, final \(covering.range.start.seconds)–\(covering.range.end.seconds) s")
        #expect(covering.range.start <= lastVolatile.range.start + WireTime(value: 1, timescale: 2), "the final result should cover the volatile one's range")

        // The same audio without volatileResults: final results only, no volatile range.
        let plain = try TestConnection(daemon.socket)
        defer { plain.close() }
        var quiet = try await WireSession.opened(plain, [module])
        try await quiet.send(clip, chunk: 1_600)
        try await quiet.finish()
        #expect(quiet.results.allSatisfy { $0.isFinal })
        #expect(quiet.volatileRanges.allSatisfy { $0 == nil })
        #expect(SpeechFixtures.inOrder(["john", "consider"], in: SpeechFixtures.words(quiet.finalText())).ok)
    }
}
