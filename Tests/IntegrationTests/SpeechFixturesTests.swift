import EarshotAudio
import EarshotWire
import Foundation
import Testing
import TestSupport

// Shared by the Speech*Tests suites: the LibriVox test speech, the embedded default catalog, a
// daemon per suite with the speech assets installed, and a raw `earshot.analyzer.*` session client.

/// Real speech and models as a fresh machine gets them (Debian `pocketsphinx-testdata`, the
/// embedded catalog `Scripts/setup.sh` builds from Debian and PyPI packages).
enum SpeechFixtures {
    static let ids = LibriVox.ids
    static let embeddedCatalog = EmbeddedModels.catalog
    static let rate = 16000

    static func path(_ id: String) -> String { LibriVox.path(id) }

    /// The project root (two levels above this file's directory).
    static let projectRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    /// Whether the embedded catalog offers both Whisper assets (always assumed under CI, where a
    /// missing one must fail the tests that need it).
    static let whisperAvailable = EmbeddedModels.runs(EmbeddedModels.catalogLists("whisper-base") && EmbeddedModels.catalogLists("whisper-tiny-en"))
    /// Whether Whisper base and espeak-ng are there for the multilingual tests (assumed under CI).
    static let multilingualAvailable = EmbeddedModels.runs(EmbeddedModels.catalogLists("whisper-base") && SynthesizedSpeech.available)
    static let whisperMissing: Comment = "the embedded catalog has no whisper-base or whisper-tiny-en asset (run Scripts/setup.sh): skipping the Whisper test"
    static let catalogAvailable = FileManager.default.fileExists(atPath: embeddedCatalog)

    /// 16 kHz mono samples of utterance `id`.
    static func samples(_ id: String) throws -> [Float] { try samples(path: path(id)) }

    static func samples(path: String) throws -> [Float] {
        let reader = try AudioFileReader(path: path)
        try #require(reader.sampleRate == rate && reader.channels == 1, "\(path) is not 16 kHz mono")
        return try reader.readAll()
    }

    /// Reference text of utterance `id`.
    static func reference(_ id: String) throws -> String {
        try #require(try WordErrorRate.librivoxReferences()[id], "no reference for \(id)")
    }

    static func words(_ hypothesis: String) -> [String] { LibriVox.words(hypothesis) }

    static func wer(_ pairs: [(reference: String, hypothesis: String)]) -> Double { LibriVox.wer(pairs) }

    /// Whether `keys` occur in `words` in this order (other words may come between).
    static func inOrder(_ keys: [String], in words: [String]) -> (ok: Bool, missing: String?) {
        var index = words.startIndex
        for key in keys {
            guard let found = words[index...].firstIndex(of: key) else { return (false, key) }
            index = found + 1
        }
        return (true, nil)
    }

    /// The utterances `repeats` times, each followed by `silence` seconds of silence, as one WAV
    /// file in `directory`; its path and the reference text.
    static func longRecording(in directory: TempDirectory, repeats: Int = 3, silence: Double = 1) throws -> (path: String, reference: String) {
        let out = directory.file("long.wav")
        return (out, try LibriVox.writeRecording(to: out, repeats: repeats, silence: silence))
    }

    /// Index just after the last 10 ms frame louder than `fraction` of the loudest frame (RMS).
    static func endOfSpeech(_ samples: [Float], fraction: Float = 0.1) -> Int {
        let frame = rate / 100
        let rms = stride(from: 0, to: samples.count - frame, by: frame).map { start in
            (samples[start..<start + frame].reduce(0) { $0 + $1 * $1 } / Float(frame)).squareRoot()
        }
        let peak = rms.max() ?? 0
        let last = rms.lastIndex { $0 >= peak * fraction } ?? rms.count - 1
        return min(samples.count, (last + 1) * frame)
    }

    static func time(samples count: Int) -> WireTime { WireTime(value: Int64(count), timescale: Int32(rate)) }

    static func dictation(_ reporting: [String] = [], preset: String? = nil) -> ModuleConfiguration {
        ModuleConfiguration(kind: .dictation, locale: "en-US", preset: preset, reportingOptions: reporting)
    }

    static func transcriber(_ reporting: [String] = [], preset: String? = nil) -> ModuleConfiguration {
        ModuleConfiguration(kind: .transcriber, locale: "en-US", preset: preset, reportingOptions: reporting)
    }
}

/// A daemon on the embedded catalog with speech assets installed through `earshot install`.
enum SpeechDaemon {
    @TaskLocal static var current: TestDaemon?

    /// The suite's daemon (see ``SpeechDaemonTrait``).
    static func shared() throws -> TestDaemon {
        try #require(current, "the suite needs the .speechDaemon trait")
    }

    /// Starts a daemon with `config` and installs `modules` (`dictation`, `transcriber`).
    static func start(config: String = "", modules: [String]) async throws -> TestDaemon {
        try #require(SpeechFixtures.catalogAvailable, "run Scripts/setup.sh first: it builds the embedded catalog")
        let daemon = try await TestDaemon(config: config)
        do {
            for module in modules where module != "transcriber" || SpeechFixtures.whisperAvailable {
                try await install(module, on: daemon)
            }
        } catch {
            await daemon.cleanUp()
            throw error
        }
        return daemon
    }

    /// Installs `module` for en-US; a transcriber also for the progressive presets (the catalog
    /// serves those with Whisper tiny.en).
    static func install(_ module: String, on daemon: TestDaemon) async throws {
        let presets: [String?] = module == "transcriber" ? [nil, "progressiveTranscription"] : [nil]
        for preset in presets {
            let run = try await ChildProcess.run(BuiltProducts.path("earshot"), ["--socket", daemon.socket, "install", "--locale", "en-US", "--module", module]
                                                 + (preset.map { ["--preset", $0] } ?? []), in: daemon.directory)
            try #require(run.status == 0, "earshot install \(module) \(preset ?? "") failed: \(run.stderr)")
        }
    }
}

/// Runs a suite's tests against one daemon (started before the first, stopped after the last).
struct SpeechDaemonTrait: SuiteTrait, TestScoping {
    let config: String
    let modules: [String]
    var isRecursive: Bool { false }

    func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        let daemon = try await SpeechDaemon.start(config: config, modules: modules)
        do {
            try await SpeechDaemon.$current.withValue(daemon) { try await function() }
        } catch {
            await daemon.cleanUp()
            throw error
        }
        await daemon.cleanUp()
    }
}

extension Trait where Self == SpeechDaemonTrait {
    /// One daemon for the whole suite, with `modules` installed for en-US.
    static func speechDaemon(config: String = "", modules: [String] = ["dictation", "transcriber"]) -> Self {
        SpeechDaemonTrait(config: config, modules: modules)
    }
}

/// Admin and stats requests on a raw connection.
extension TestConnection {
    /// The reply to `event` (skipping session events and other replies), by request id.
    func reply<E: WireEvent>(to event: E, id: String = UUID().uuidString, timeout: Duration = .seconds(30)) async throws -> Frame {
        var frame = try Frame(event)
        frame.data["id"] = .string(id)
        try await channel.send(frame)
        let deadline = ContinuousClock.now + timeout
        while true {
            let next = try #require(try await self.next(timeout: deadline - ContinuousClock.now), "connection closed while waiting for the reply to \(E.eventType)")
            if next.requestID == id { return next }
        }
    }

    func stats() async throws -> StatsReply {
        try await reply(to: StatsRequest()).decode(StatsReply.self)
    }

    func assets() async throws -> AssetsReply {
        try await reply(to: AssetsRequest()).decode(AssetsReply.self)
    }

    /// Polls `earshot.stats` until `condition` holds; returns the last reply (check it again).
    func pollStats(timeout: Duration = .seconds(10), until condition: (StatsReply) -> Bool) async throws -> StatsReply {
        let deadline = ContinuousClock.now + timeout
        while true {
            let stats = try await stats()
            if condition(stats) || ContinuousClock.now >= deadline { return stats }
            try await Task.sleep(for: .milliseconds(50))
        }
    }
}

/// One analysis session over a raw connection: open, audio, control, and every event it sends.
struct WireSession: Sendable {
    let connection: TestConnection
    let id: String
    /// The daemon's reply to the open.
    var opened: AnalyzerOpened?
    /// Results in arrival order.
    private(set) var results: [AnalyzerResult] = []
    /// Volatile-range events in arrival order.
    private(set) var volatileRanges: [WireTimeRange?] = []
    private(set) var finished: AnalyzerFinished?
    /// Replies to this session's control requests, by request id.
    private var replies: [String: Frame] = [:]
    private var nextRequest = 1

    /// Opens a session: the session, or the `error` the daemon answered with.
    static func open(_ connection: TestConnection, _ modules: [ModuleConfiguration], options: AnalysisOptions = AnalysisOptions()) async throws -> (session: WireSession?, error: ErrorEvent?) {
        try await connection.send(AnalyzerOpen(modules: modules, options: options))
        return try await openReply(connection)
    }

    /// The reply to an open sent on `connection`, past the progress events of a queued open.
    static func openReply(_ connection: TestConnection, timeout: Duration = .seconds(10)) async throws -> (session: WireSession?, error: ErrorEvent?) {
        var frame = try await connection.next(timeout: timeout)
        while frame?.type == AnalyzerProgress.eventType { frame = try await connection.next(timeout: timeout) }
        let reply = try #require(frame, "the connection closed before the open's reply")
        if reply.type == ErrorEvent.eventType { return (nil, try reply.decode(ErrorEvent.self)) }
        let opened = try reply.decode(AnalyzerOpened.self)
        #expect(opened.audioFormats.first == .speech16k)
        return (WireSession(connection: connection, id: opened.session, opened: opened), nil)
    }

    /// Opens a session that must succeed.
    static func opened(_ connection: TestConnection, _ modules: [ModuleConfiguration], options: AnalysisOptions = AnalysisOptions()) async throws -> WireSession {
        let (session, error) = try await open(connection, modules, options: options)
        if let session { return session }
        throw WireError(error?.code ?? .internalError, "open failed: \(error?.text ?? "no reply")")
    }

    /// Sends `samples` in chunks of `chunk` samples (s16le), the first at `start` if given.
    func send(_ samples: ArraySlice<Float>, start: WireTime? = nil, chunk: Int = 8000, format: AudioFormatSpec = .speech16k) async throws {
        var offset = samples.startIndex
        var first = true
        while offset < samples.endIndex {
            let end = min(offset + chunk, samples.endIndex)
            try await connection.send(AnalyzerAudio(session: id, format: format, start: first ? start : nil), payload: PCMSamples.s16le(Array(samples[offset..<end])))
            first = false
            offset = end
        }
    }

    func send(_ samples: [Float], start: WireTime? = nil, chunk: Int = 8000) async throws {
        try await send(samples[...], start: start, chunk: chunk)
    }

    /// Sends a control request and waits for its reply (collecting events meanwhile).
    @discardableResult
    mutating func control(_ action: String, time: WireTime? = nil, mode: FinishMode? = nil, timeout: Duration = .seconds(60)) async throws -> AnalyzerControlDone {
        let requestID = "\(id)-c\(nextRequest)"
        nextRequest += 1
        var frame = try Frame(AnalyzerControl(session: id, action: action, time: time, mode: mode))
        frame.data["id"] = .string(requestID)
        try await connection.channel.send(frame)
        try await pump(timeout: timeout) { $0.replies[requestID] != nil }
        let removed = replies.removeValue(forKey: requestID)
        let reply = try #require(removed)
        if reply.type == ErrorEvent.eventType {
            let error = try reply.decode(ErrorEvent.self)
            throw WireError(error.code ?? .internalError, "\(action) failed: \(error.text)")
        }
        return try reply.decode(AnalyzerControlDone.self)
    }

    /// `finish` in `mode`, then waits for `earshot.analyzer.finished`; returns the control reply.
    @discardableResult
    mutating func finish(_ mode: FinishMode = .finalizeThroughEndOfInput, time: WireTime? = nil, timeout: Duration = .seconds(60)) async throws -> AnalyzerControlDone {
        let done = try await control("finish", time: time, mode: mode, timeout: timeout)
        try await waitFinished(timeout: timeout)
        return done
    }

    /// Waits for `earshot.analyzer.finished`.
    @discardableResult
    mutating func waitFinished(timeout: Duration = .seconds(60)) async throws -> AnalyzerFinished {
        try await pump(timeout: timeout) { $0.finished != nil }
        return try #require(finished)
    }

    /// Reads frames until `condition` holds; throws when `timeout` passes first.
    mutating func pump(timeout: Duration, until condition: (WireSession) -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while !condition(self) {
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { throw WireError(.internalError, "session \(id): timed out after \(timeout)") }
            guard let frame = try await connection.next(timeout: remaining) else {
                throw WireError(.internalError, "session \(id): the daemon closed the connection")
            }
            record(frame)
        }
    }

    private mutating func record(_ frame: Frame) {
        if let request = frame.requestID {
            replies[request] = frame
            return
        }
        guard frame.data["session"]?.stringValue == id else { return }
        switch frame.type {
        case AnalyzerResult.eventType: if let r = try? frame.decode(AnalyzerResult.self) { results.append(r) }
        case AnalyzerVolatileRange.eventType: if let v = try? frame.decode(AnalyzerVolatileRange.self) { volatileRanges.append(v.range) }
        case AnalyzerFinished.eventType: finished = try? frame.decode(AnalyzerFinished.self)
        default: break
        }
    }

    /// Final results of module `module`.
    func finals(module: Int = 0) -> [AnalyzerResult] { results.filter { $0.module == module && $0.isFinal } }

    /// The final text of module `module`, results joined in order.
    func finalText(module: Int = 0) -> String {
        finals(module: module).map { $0.text.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }.joined(separator: " ")
    }
}
