import EarshotWire
import Foundation

/// Analyses one audio timeline with N modules, each delivering results through its `results`
/// (Apple's `SpeechAnalyzer`). The models run in `earshotd`; this actor streams audio to it and
/// routes results back.
///
/// Finishing the input does not finish the session: call a finish method (or
/// ``finalizeAndFinishThroughEndOfInput()``), after which every module's results end.
public actor SpeechAnalyzer {
    /// Analysis options (Apple's `SpeechAnalyzer.Options`).
    public struct Options: Sendable, Equatable {
        public enum ModelRetention: Sendable, Hashable, CaseIterable {
            case whileInUse, lingering, processLifetime
        }
        public let priority: TaskPriority
        public let modelRetention: ModelRetention
        public let ignoresResourceLimits: Bool
        /// Earshot extension (Ollama's `keep_alive`), with `.lingering` only: how long the models
        /// stay loaded after the session instead of the daemon's `LingerSeconds`; zero unloads them
        /// as soon as no session uses them. The daemon caps it (see ``SpeechAnalyzer/grantedKeepAlive``);
        /// a negative one, or one with another retention, fails the session's opening.
        public let keepAlive: Duration?
        /// Earshot extension: what the input is. A whole `.recording` (what analysing an
        /// `AVAudioFile` always is) lets Whisper decode consecutive utterances together — more
        /// accurate and faster — and delivers each one's final result later than `.live` input.
        public let input: Input

        /// Earshot extension: live audio or a whole recording.
        public enum Input: Sendable, Hashable, CaseIterable {
            case live, recording
        }

        /// Earshot extension: how Whisper decodes the session (nil: the daemon's defaults).
        /// PocketSphinx takes none of it, and says so in its module's `unhonoredRequests`.
        public let decoding: Decoding?

        /// Earshot extension: Whisper's decoding of a session.
        public struct Decoding: Sendable, Hashable {
            /// Text every decode continues (names, spellings, style); Whisper keeps its last 223
            /// tokens, and a longer prompt's dropped tokens are counted in each result's `decoding`.
            public var prompt: String?
            /// Beams for final results, 1 (greedy) to 16; volatile results stay greedy.
            public var beamSize: Int?
            /// Sampling temperature in [0, 1]; 0 or nil: search, with fallback to higher
            /// temperatures only when a result fails Whisper's checks.
            public var temperature: Double?

            public init(prompt: String? = nil, beamSize: Int? = nil, temperature: Double? = nil) {
                self.prompt = prompt
                self.beamSize = beamSize
                self.temperature = temperature
            }
        }

        public init(priority: TaskPriority, modelRetention: ModelRetention, ignoresResourceLimits: Bool = false) {
            self.init(priority: priority, modelRetention: modelRetention, ignoresResourceLimits: ignoresResourceLimits, keepAlive: nil)
        }

        /// Options with a keep-alive, an input kind or decoding options (Earshot extension).
        public init(priority: TaskPriority, modelRetention: ModelRetention, ignoresResourceLimits: Bool = false, keepAlive: Duration?, input: Input = .live,
                    decoding: Decoding? = nil) {
            self.priority = priority
            self.modelRetention = modelRetention
            self.ignoresResourceLimits = ignoresResourceLimits
            self.keepAlive = keepAlive
            self.input = input
            self.decoding = decoding
        }

        var wire: AnalysisOptions {
            let retention: EarshotWire.ModelRetention = switch modelRetention {
            case .whileInUse: .whileInUse
            case .lingering: .lingering
            case .processLifetime: .processLifetime
            }
            return AnalysisOptions(modelRetention: retention, ignoresResourceLimits: ignoresResourceLimits, keepAliveSeconds: keepAlive.map { $0 / .seconds(1) },
                                   input: input == .recording ? .recording : .live,
                                   decoding: decoding.map { DecodingOptions(prompt: $0.prompt, beamSize: $0.beamSize, temperature: $0.temperature) })
        }
    }

    public private(set) var modules: [any SpeechModule]
    public let options: Options?
    public private(set) var context: AnalysisContext
    /// The range whose results may still change, if any.
    public private(set) var volatileRange: CMTimeRange?
    /// Earshot extension: once the session is open, the keep-alive the daemon granted for
    /// ``Options/keepAlive`` (nil when none was asked for), and whether its `MaxKeepAliveSec`
    /// cut it short.
    public private(set) var grantedKeepAlive: (duration: Duration, clamped: Bool)?
    private var volatileHandler: (@Sendable (CMTimeRange?, Bool, Bool) -> Void)?
    private var connection: DaemonConnection?
    private var sessionID: String?
    /// The session's events, handled in order.
    private var eventSink: AsyncStream<Frame>.Continuation?
    private var lastSampleTime: CMTime?
    private var finished = false
    private var failure: (any Error)?
    /// Analysis started by `init(inputSequence:…)` or `start(inputSequence:)`.
    private let autonomous = TaskBox()

    public init(modules: [any SpeechModule], options: Options? = nil) {
        self.modules = modules
        self.options = options
        context = AnalysisContext()
    }

    /// Creates the analyzer and starts analysing `inputSequence` autonomously. Ending the sequence
    /// does not finish the session: call a finish method.
    public init<S: AsyncSequence & Sendable>(inputSequence: S, modules: [any SpeechModule], options: Options? = nil,
                                             analysisContext: AnalysisContext = AnalysisContext(),
                                             volatileRangeChangedHandler: (@Sendable (CMTimeRange?, Bool, Bool) -> Void)? = nil) where S.Element == AnalyzerInput {
        self.modules = modules
        self.options = options
        context = analysisContext
        volatileHandler = volatileRangeChangedHandler
        autonomous.set(Task { [self] in await self.runAutonomously(finishAfterInput: false) { try await self.analyzeSequence(inputSequence) } })
    }

    /// Creates the analyzer and starts analysing `inputAudioFile` autonomously (converted to the
    /// analyzer's format); with `finishAfterFile`, finalizes and finishes after its last sample.
    public init(inputAudioFile: AVAudioFile, modules: [any SpeechModule], options: Options? = nil,
                analysisContext: AnalysisContext = AnalysisContext(), finishAfterFile: Bool = false,
                volatileRangeChangedHandler: (@Sendable (CMTimeRange?, Bool, Bool) -> Void)? = nil) async throws {
        self.modules = modules
        self.options = options
        context = analysisContext
        volatileHandler = volatileRangeChangedHandler
        try await start(inputAudioFile: inputAudioFile, finishAfterFile: finishAfterFile)
    }

    /// Earshot extension: the format the daemon analyses, 16 kHz mono 16-bit PCM — what
    /// ``bestAvailableAudioFormat(compatibleWith:)`` answers once the modules' assets are installed,
    /// for a client that already knows they are (no daemon query).
    public static let analyzerFormat = AVAudioFormat(commonFormat: .pcmFormatInt16, sampleRate: Double(AudioFormatSpec.speech16k.rate),
                                              channels: AVAudioChannelCount(AudioFormatSpec.speech16k.channels), interleaved: true)!

    /// The best format for `modules`: 16 kHz mono 16-bit PCM, or nil when their assets are not
    /// installed or no daemon answers (one is started first when none does; see ``EarshotService``).
    public static func bestAvailableAudioFormat(compatibleWith modules: [any SpeechModule]) async -> AVAudioFormat? {
        guard await AssetInventory.status(forModules: modules) == .installed else { return nil }
        return analyzerFormat
    }

    /// As ``bestAvailableAudioFormat(compatibleWith:)``; the daemon's models run at 16 kHz mono
    /// whatever `considering` prefers, so that is the best format for any source.
    public static func bestAvailableAudioFormat(compatibleWith modules: [any SpeechModule], considering naturalFormat: AVAudioFormat?) async -> AVAudioFormat? {
        await bestAvailableAudioFormat(compatibleWith: modules)
    }

    /// Loads the models now so the first results come without a loading delay.
    public func prepareToAnalyze(in format: AVAudioFormat?) async throws {
        _ = try await session()
    }

    /// As ``prepareToAnalyze(in:)``, handing `progressReadyHandler` a `Progress` that completes
    /// when the models are loaded.
    public func prepareToAnalyze(in format: AVAudioFormat?, withProgressReadyHandler progressReadyHandler: (@Sendable (Progress) -> Void)?) async throws {
        let progress = Progress(totalUnitCount: 1)
        progressReadyHandler?(progress)
        _ = try await session()
        progress.completedUnitCount = 1
    }

    /// Replaces the modules. During analysis the new modules analyse audio from now on; modules
    /// no longer in the list stop, and their results end.
    public func setModules(_ newModules: [any SpeechModule]) async throws {
        var unhonored: [UnhonoredRequest]?
        if let (connection, id) = try await liveSession() {
            let reply = try await connection.request(AnalyzerControl(session: id, action: "set-modules", modules: try await Self.sessionConfigurations(newModules)),
                                                     expecting: AnalyzerControlDone.self)
            let kept = Set(newModules.map { ObjectIdentifier($0 as AnyObject) })
            for module in modules where !kept.contains(ObjectIdentifier(module as AnyObject)) {
                (module as? any ResultReceiving)?.finishResults(nil)
            }
            unhonored = reply.unhonored ?? []
        }
        modules = newModules
        if let unhonored { deliver(unhonored) }
    }

    /// Sets the context (contextual strings) for the analysis from now on.
    public func setContext(_ newContext: AnalysisContext) async throws {
        if let (connection, id) = try await liveSession() {
            let reply = try await connection.request(AnalyzerControl(session: id, action: "set-context", context: newContext.wire), expecting: AnalyzerControlDone.self)
            deliver(reply.unhonored ?? [])
        }
        context = newContext
    }

    /// Calls `handler(range, changedStart, changedEnd)` whenever the volatile range changes.
    public func setVolatileRangeChangedHandler(_ handler: (@Sendable (CMTimeRange?, Bool, Bool) -> Void)?) {
        volatileHandler = handler
    }

    /// Streams `inputSequence` to the session; returns the time just after the last sample
    /// consumed (nil if none) when the sequence ends or the task is cancelled. Analysis of the last
    /// audio may still be in progress: finalize or finish to wait for it.
    ///
    /// Buffers of any length are sent as several frames, each within the payload limit the daemon
    /// announced (`earshot.welcome` `limits.frame.max_payload_bytes`). A buffer whose sample rate is
    /// not a whole number of Hz (1 Hz … 2³¹ − 1 Hz) or that has no channels throws
    /// ``EarshotError/unsupportedAudioFormat(_:)``.
    public func analyzeSequence<S: AsyncSequence & Sendable>(_ inputSequence: S) async throws -> CMTime? where S.Element == AnalyzerInput {
        let (connection, id) = try await session()
        let payloadLimit = await connection.welcome?.limits.frame.maxPayloadBytes ?? FrameLimits.default.maxPayloadBytes
        do {
            for try await input in inputSequence {
                if Task.isCancelled || finished { break }
                let format = try Self.wireFormat(input.bufferFormat)
                // Whole sample frames per payload, within the daemon's limit.
                let framesPerPayload = max(1, payloadLimit / (format.width * format.channels))
                var first = 0
                while first < input.frameLength {
                    let end = min(first + framesPerPayload, input.frameLength)
                    try await connection.send(AnalyzerAudio(session: id, format: format, start: first == 0 ? input.bufferStartTime?.wire : nil),
                                              payload: input.wireBytes(frames: first..<end))
                    first = end
                }
                let start = input.bufferStartTime ?? lastSampleTime ?? .zero
                lastSampleTime = start + CMTime(value: Int64(input.frameLength), timescale: Int32(format.rate))
            }
        } catch is CancellationError {
            // Cancelled: return the watermark, as Apple's does.
        }
        if let failure { throw failure }
        return lastSampleTime
    }

    /// The wire format of `format`, or ``EarshotError/unsupportedAudioFormat(_:)`` for a rate that
    /// is not a whole, positive number of Hz that fits a time scale, or no channels.
    static func wireFormat(_ format: AVAudioFormat) throws -> AudioFormatSpec {
        let rate = format.sampleRate
        guard rate.isFinite, rate >= 1, rate <= Double(Int32.max), rate.rounded() == rate else {
            throw EarshotError.unsupportedAudioFormat("sample rate \(rate) Hz is not a whole, positive number of Hz")
        }
        guard format.channelCount >= 1 else {
            throw EarshotError.unsupportedAudioFormat("\(format.channelCount) channels")
        }
        let int16 = format.commonFormat == .pcmFormatInt16
        return AudioFormatSpec(rate: Int(rate), width: int16 ? 2 : 4, channels: Int(format.channelCount), encoding: int16 ? "s16le" : "f32le")
    }

    /// Analyses `file` (converted to the analyzer's format, decoded on dedicated threads) like
    /// ``analyzeSequence(_:)``: returns the time after its last sample (nil if it has none).
    public func analyzeSequence(from file: AVAudioFile) async throws -> CMTime? {
        _ = try await session(recording: true)
        return try await analyzeSequence(AnalyzerInputSequence.file(analyzerFormat: Self.analyzerFormat) { file })
    }

    /// Starts analysing `inputSequence` in the background.
    public func start<S: AsyncSequence & Sendable>(inputSequence: S) async throws where S.Element == AnalyzerInput {
        _ = try await session()
        autonomous.set(Task { [self] in await self.runAutonomously(finishAfterInput: false) { try await self.analyzeSequence(inputSequence) } })
    }

    /// Starts analysing `inputAudioFile` in the background; with `finishAfterFile`, finalizes and
    /// finishes after its last sample, so every module's results end.
    public func start(inputAudioFile: AVAudioFile, finishAfterFile: Bool = false) async throws {
        _ = try await session(recording: true)
        autonomous.set(Task { [self] in await self.runAutonomously(finishAfterInput: finishAfterFile) { try await self.analyzeSequence(from: inputAudioFile) } })
    }

    /// Runs autonomous analysis: a failure (an unreadable file) finishes the session with that
    /// error, so results streams throw it instead of waiting.
    private func runAutonomously(finishAfterInput: Bool, _ analyze: @Sendable () async throws -> CMTime?) async {
        do {
            let last = try await analyze()
            guard finishAfterInput else { return }
            if let last { try await finalizeAndFinish(through: last) } else { await finishNow() }
        } catch {
            guard !finished else { return }
            end(error)
            if let connection, let sessionID {
                _ = try? await connection.request(AnalyzerControl(session: sessionID, action: "finish", mode: .cancelNow), expecting: AnalyzerControlDone.self)
            }
        }
    }

    /// Stops analysing audio before `time`.
    public func cancelAnalysis(before time: CMTime) {
        guard let connection, let sessionID else { return }
        Task { _ = try? await connection.request(AnalyzerControl(session: sessionID, action: "cancel-before", time: time.wire), expecting: AnalyzerControlDone.self) }
    }

    /// Finalizes results up to `time` (nil: all input so far); the session continues.
    public func finalize(through time: CMTime?) async throws {
        guard let (connection, id) = try await liveSession() else { return }
        _ = try await connection.request(AnalyzerControl(session: id, action: "finalize", time: time?.wire), expecting: AnalyzerControlDone.self)
    }

    /// Finalizes through `time`, then finishes: every module's results end.
    public func finalizeAndFinish(through time: CMTime) async throws {
        try await finish(.finalizeThrough, time: time)
    }

    /// Finalizes everything received, then finishes.
    public func finalizeAndFinishThroughEndOfInput() async throws {
        await autonomous.task?.value
        try await finish(.finalizeThroughEndOfInput, time: nil)
    }

    /// Finishes once input reaches `time`.
    public func finish(after time: CMTime) async throws {
        try await finish(.after, time: time)
    }

    /// Drops pending work and finishes now.
    public func cancelAndFinishNow() async {
        autonomous.task?.cancel()
        await finishNow()
    }

    private func finishNow() async {
        try? await finish(.cancelNow, time: nil)
        if !finished { end(nil) }
    }

    private func finish(_ mode: FinishMode, time: CMTime?) async throws {
        guard let (connection, id) = try await liveSession() else {
            end(nil)
            return
        }
        _ = try await connection.request(AnalyzerControl(session: id, action: "finish", time: time?.wire, mode: mode), expecting: AnalyzerControlDone.self)
        if let failure { throw failure }
    }

    /// The open session, or nil if none was ever opened (then there is nothing to finish).
    private func liveSession() async throws -> (DaemonConnection, String)? {
        if let failure { throw failure }
        guard let connection, let sessionID, !finished else { return nil }
        return (connection, sessionID)
    }

    /// `modules` as a session opens them (a dictation module with its custom language model).
    private static func sessionConfigurations(_ modules: [any SpeechModule]) async throws -> [ModuleConfiguration] {
        var configurations: [ModuleConfiguration] = []
        for module in modules {
            if let dictation = module as? DictationTranscriber {
                configurations.append(try await dictation.sessionConfiguration())
            } else if let transcriber = module as? SpeechTranscriber {
                configurations.append(try await transcriber.sessionConfiguration())
            } else {
                configurations.append(module.moduleConfiguration)
            }
        }
        return configurations
    }

    /// Opens the session on first use; opened for file input (`recording`), it is a recording
    /// whatever ``Options/input`` says.
    private func session(recording: Bool = false) async throws -> (DaemonConnection, String) {
        if let failure { throw failure }
        if let connection, let sessionID { return (connection, sessionID) }
        guard !finished else { throw EarshotError.daemon(WireError(.badRequest, "the analysis session has finished")) }
        let connection = try await EarshotService.shared.connection()
        var wireOptions = options?.wire ?? AnalysisOptions()
        if recording { wireOptions.input = .recording }
        // A busy daemon queues the open: standard error says so while it waits (Earshot extension).
        let reply = try await connection.request(
            AnalyzerOpen(modules: try await Self.sessionConfigurations(modules), options: wireOptions, context: context.wire),
            expecting: AnalyzerOpened.self, progress: { frame in
                guard let progress = try? frame.decode(AnalyzerProgress.self) else { return }
                FileHandle.standardError.write(Data("Earshot: the daemon is busy; waiting for a free analysis slot (place \(progress.position) in its queue)\n".utf8))
            })
        self.connection = connection
        sessionID = reply.session
        grantedKeepAlive = reply.keepAliveSeconds.map { (.seconds($0), reply.keepAliveClamped ?? false) }
        deliver(reply.unhonored)
        // One task handles the session's events in arrival order: a task per frame could run
        // `finished` before the last results and drop them.
        let (events, sink) = AsyncStream.makeStream(of: Frame.self)
        eventSink = sink
        await connection.subscribe(session: reply.session) { sink.yield($0) }
        Task { [weak self] in
            for await frame in events {
                guard let self else { return }
                await self.handle(frame)
            }
        }
        return (connection, reply.session)
    }

    /// Hands each module the daemon's report of what its engine does not honour (replacing the
    /// previous one) and writes what is new in it to standard error.
    private func deliver(_ unhonored: [UnhonoredRequest]) {
        for (index, module) in modules.enumerated() {
            guard let receiver = module as? any ResultReceiving else { continue }
            let previous = receiver.unhonored
            let requests = unhonored.filter { $0.module == index }
            receiver.noteUnhonored(requests)
            for request in requests where !previous.contains(request) {
                let value = request.kind == .contextualString ? "contextual string \"\(request.value)\"" : request.value
                FileHandle.standardError.write(Data("Earshot: \(type(of: module)): \(value) not honoured: \(request.reason)\n".utf8))
            }
        }
    }

    private func handle(_ frame: Frame) {
        switch frame.type {
        case AnalyzerResult.eventType:
            guard let result = try? frame.decode(AnalyzerResult.self), modules.indices.contains(result.module) else { return }
            (modules[result.module] as? any ResultReceiving)?.receive(result)
        case AnalyzerVolatileRange.eventType:
            guard let event = try? frame.decode(AnalyzerVolatileRange.self) else { return }
            let old = volatileRange
            let range = event.range.map(CMTimeRange.init)
            volatileRange = range
            volatileHandler?(range, old?.start != range?.start, old?.end != range?.end)
        case AnalyzerFinished.eventType:
            let event = try? frame.decode(AnalyzerFinished.self)
            end(event?.error.map { EarshotError.daemon($0.wireError) })
        case ErrorEvent.eventType:
            end(EarshotError.daemon((try? frame.decode(ErrorEvent.self))?.wireError ?? WireError(.internalError, "analysis failed")))
        default:
            break
        }
    }

    private func end(_ error: (any Error)?) {
        guard !finished else { return }
        finished = true
        failure = error
        eventSink?.finish()
        for module in modules { (module as? any ResultReceiving)?.finishResults(error) }
    }
}

/// Holds the autonomous analysis task (set from a nonisolated initializer).
final class TaskBox: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Task<Void, Never>?
    var task: Task<Void, Never>? { lock.withLock { stored } }
    func set(_ task: Task<Void, Never>) { lock.withLock { stored = task } }
}

/// Process-wide model management (Apple's `SpeechModels`).
public enum SpeechModels {
    /// Unloads every model that `lingering` or `processLifetime` retention keeps but no session uses.
    public static func endRetention() async {
        _ = try? await EarshotService.shared.request(EndRetentionRequest(), expecting: EndRetentionReply.self)
    }
}
