import Dispatch
import EarshotLanguageModel
import EarshotSystem
import EarshotEngineLink
import EarshotWire
import Foundation

/// Limits and defaults for analysis.
public struct SpeechSettings: Sendable {
    public var maxConcurrentAnalyses: Int
    /// Cap for sessions that ignore resource limits.
    public var maxConcurrentAnalysesHard: Int
    /// How long `lingering` models stay loaded after their last session.
    public var lingerSeconds: Double
    /// The longest keep-alive a session may ask for (``AnalysisOptions/keepAliveSeconds``).
    public var maxKeepAliveSeconds: Double
    /// ONNX Runtime threads per Whisper decode.
    public var inferenceThreads: Int
    /// Threads of the model copy a session's overlapping Whisper decodes move to (``BatchLanes``);
    /// 0: no copy, overlapping decodes share the session's model.
    public var batchThreads: Int
    /// Most Whisper decodes at once, daemon-wide (shared fairly between sessions) and of one session's
    /// segments: one per core, at least 4 (the engine batches up to four decodes of one model and
    /// runs as many graphs at once as cores over the model's threads, so more in flight do not
    /// oversubscribe the cores).
    public var decodeSlots: Int
    /// Most seconds of a recording's consecutive segments one Whisper decode takes together
    /// (``AnalysisInput/recording``); 0: one segment a decode.
    public var recordingWindowSeconds: Double
    /// A recording that fits in one window is decoded whole at audio-stop, while the detector
    /// still reads it (``RecordingSpeculation``), when it has at least
    /// ``AnalysisSession/defaultSpeculativeBacklog`` of it (a share) left to read.
    public var speculativeDecode: Bool
    /// Opens that wait, first come first served, for a slot when ``maxConcurrentAnalyses`` run;
    /// beyond them an open is refused (0: refused at once).
    public var maxQueued: Int
    /// Most bytes loaded models may take together (nil: no bound); see ``ModelCache``.
    public var maxModelMemoryBytes: Int?
    /// Whisper's beam for final results (1: greedy); volatile results are always greedy.
    public var beamSize: Int
    /// A recording's windows decode one after another, each prompted with the text before it.
    public var conditionOnPreviousText: Bool

    public init(maxConcurrentAnalyses: Int = 4, maxConcurrentAnalysesHard: Int = 16, lingerSeconds: Double = 300, maxKeepAliveSeconds: Double = 3600,
                inferenceThreads: Int = 2, batchThreads: Int = 0, decodeSlots: Int = max(ProcessInfo.processInfo.activeProcessorCount, 4),
                recordingWindowSeconds: Double = 20, speculativeDecode: Bool = true, maxQueued: Int = 16, maxModelMemoryBytes: Int? = nil,
                beamSize: Int = 5, conditionOnPreviousText: Bool = true) {
        self.maxConcurrentAnalyses = maxConcurrentAnalyses
        self.maxConcurrentAnalysesHard = maxConcurrentAnalysesHard
        self.lingerSeconds = lingerSeconds
        self.maxKeepAliveSeconds = maxKeepAliveSeconds
        self.inferenceThreads = inferenceThreads
        self.batchThreads = max(0, batchThreads)
        self.decodeSlots = max(1, decodeSlots)
        self.recordingWindowSeconds = max(0, recordingWindowSeconds)
        self.speculativeDecode = speculativeDecode
        self.maxQueued = max(0, maxQueued)
        self.maxModelMemoryBytes = maxModelMemoryBytes
        self.beamSize = min(max(1, beamSize), EngineWhisperDecode.maxBeamSize)
        self.conditionOnPreviousText = conditionOnPreviousText
    }

    /// The keep-alive `options` get: what they ask for, at most ``maxKeepAliveSeconds``; nil when
    /// they ask for none.
    public func keepAlive(granting options: AnalysisOptions) -> (seconds: Double, clamped: Bool)? {
        options.keepAliveSeconds.map { ($0 > maxKeepAliveSeconds ? maxKeepAliveSeconds : $0, $0 > maxKeepAliveSeconds) }
    }
}

/// An installed asset a session uses (the daemon leases it from the asset inventory).
public struct ModelAsset: Sendable, Hashable {
    /// `id@version`.
    public var key: String
    public var engine: String
    /// Role → absolute path of each file.
    public var files: [String: String]
    public init(key: String, engine: String, files: [String: String]) {
        self.key = key
        self.engine = engine
        self.files = files
    }

    /// The engine, if this daemon runs it.
    public var kind: EngineKind? { EngineKind(rawValue: engine) }
}

/// What opening a session needs: each module with the asset serving it, the VAD asset.
public struct SessionPlan: Sendable {
    public var modules: [(configuration: ModuleConfiguration, asset: ModelAsset)]
    public var vad: ModelAsset
    public var options: AnalysisOptions
    public var context: AnalysisContextData
    /// The connection that owns the session (for `processLifetime` retention and cleanup).
    public var owner: SessionOwner
    /// The uid of the connection's peer: retention is recorded per user.
    public var ownerUID: UInt32
    /// The custom language models dictation modules name (``ModuleConfiguration/languageModel``),
    /// by handle: the owner's prepared data.
    public var languageModels: [String: CustomLanguageModelDocument]
    public init(modules: [(configuration: ModuleConfiguration, asset: ModelAsset)], vad: ModelAsset, options: AnalysisOptions, context: AnalysisContextData, owner: SessionOwner, ownerUID: UInt32,
                languageModels: [String: CustomLanguageModelDocument] = [:]) {
        self.modules = modules
        self.vad = vad
        self.options = options
        self.context = context
        self.owner = owner
        self.ownerUID = ownerUID
        self.languageModels = languageModels
    }
}

/// A shared model whose decodes wait for a slot of the daemon-wide gate, as session `client`
/// (on the session's own threads, never the pool); with `batch`, overlapping decodes move to its
/// single-threaded copy. Each decode's cost goes to `observer` under `engine`.
struct GatedTranscriber: SegmentTranscribing {
    let model: any SegmentTranscribing
    let gate: DecodeGate
    let client: String
    let engine: String
    let observer: (any SpeechObserver)?
    /// The session's language, task, search and context, under what each call sets.
    var settings = DecodeSettings()
    var batch: BatchLanes?
    var isUsable: Bool { model.isUsable }
    func transcribe(_ samples: [Float], sampleRate: Int, settings call: DecodeSettings) throws -> Transcription {
        try gated(samples.count, sampleRate) { try $0.transcribe(samples, sampleRate: sampleRate, settings: call.over(settings)) }
    }

    /// The slot is given back while the decode waits for its earlier text: the decode before,
    /// which gives it, may need the slot.
    func transcribe(_ samples: [Float], sampleRate: Int, settings call: DecodeSettings, previousText: () -> String?) throws -> Transcription {
        var waited = 0.0
        return try gated(samples.count, sampleRate, waited: { waited }) { chosen in
            try chosen.transcribe(samples, sampleRate: sampleRate, settings: call.over(settings)) {
                let start = DispatchTime.now()
                gate.release(client: client)
                defer {
                    gate.acquire(client: client)
                    waited += secondsSince(start)
                }
                return previousText()
            }
        }
    }

    /// Runs `decode` on the chosen model within a slot, its time (less what `waited` says it
    /// spent waiting) going to the observer.
    private func gated(_ count: Int, _ sampleRate: Int, waited: () -> Double = { 0 },
                       _ decode: (any SegmentTranscribing) throws -> Transcription) throws -> Transcription {
        gate.acquire(client: client)
        defer { gate.release(client: client) }
        let chosen = batch?.begin() ?? model
        defer { batch?.end() }
        let start = DispatchTime.now()
        let transcription = try decode(chosen)
        if sampleRate > 0 {
            observer?.decoded(engine: engine, audioSeconds: Double(count) / Double(sampleRate), computeSeconds: secondsSince(start) - waited())
        }
        return transcription
    }
}

/// Analysis statistics for `earshotctl stats`.
public struct SpeechStats: Sendable, Hashable, Codable {
    public struct Model: Sendable, Hashable, Codable {
        public var key: String
        public var users: Int
        public var memoryBytes: Int
    }
    public var sessions: Int
    /// Open sessions by engine (a session with modules on two engines counts under both).
    public var sessionsByEngine: [String: Int]
    /// Shared models, then the per-session decoders (PocketSphinx), one row per asset as
    /// `id@version/per-session` with their sessions and approximate memory.
    public var models: [Model]
    /// Model loads since start (a shared model loads once).
    public var loads: Int
    /// Voice activity detectors of finished sessions kept for the next session (while a model is loaded).
    public var spareDetectors: Int = 0
}

/// Whose a session is, as the speech service sees it: a token its caller makes (the daemon: one
/// per client connection), compared and nothing else. An owner's `processLifetime` models stay
/// loaded until ``SpeechService/ownerGone(_:)``.
public struct SessionOwner: Hashable, Sendable {
    private let token: Int
    public init(token: Int) { self.token = token }
}

/// How a ``SpeechService`` loads a Whisper-class model (blocking; the model and its resident
/// bytes): the daemon's runs Earshot's decoder in the engine process; tests of the layers above
/// inject a stand-in that answers at once.
public struct SegmentModelLoader: Sendable {
    public let load: @Sendable (_ files: WhisperModel.Files, _ threads: Int) throws -> (model: any SegmentTranscribing, memoryBytes: Int)

    public init(load: @escaping @Sendable (_ files: WhisperModel.Files, _ threads: Int) throws -> (model: any SegmentTranscribing, memoryBytes: Int)) {
        self.load = load
    }

    /// Whisper through Earshot's decoder in the engine process: one load per model and thread
    /// count, language, task and search travelling with each decode.
    public static let engineProcess = SegmentModelLoader { files, threads in
        let model = try WhisperModel(files: files, language: nil, task: .transcribe, numThreads: threads)
        return (model, model.memoryBytes)
    }
}

/// Runs analysis sessions: admission, shared models with retention, per-session decoders.
public actor SpeechService {
    public nonisolated let settings: SpeechSettings
    private let cache: ModelCache
    private let admission: Admission
    private var sessions: [String: OpenSession] = [:]
    private struct OpenSession {
        var session: AnalysisSession
        var plan: SessionPlan
        var keys: [String]
        /// The session's PocketSphinx decoders by module index (contextual strings reach them).
        var streams: [Int: PocketSphinxStream]
        /// Its Whisper modules' single-threaded copies for overlapping decodes (released at close).
        var batches: [BatchLanes]
    }
    /// Bounds concurrent Whisper decodes to one per core (each decode holds 65–80 MiB of ONNX
    /// Runtime working memory; more at once only adds memory, not throughput).
    private let decodeGate: DecodeGate
    /// Sessions admitted and still loading their models.
    private var opening = 0
    /// Opens waiting for a slot.
    private var queue = AdmissionQueue()
    private var nextID = 1
    /// Custom language models compiled for sessions, by handle, most recent last (compiling the
    /// largest data allowed takes seconds; sessions of one app reuse it).
    private var compiledModels: [(model: String, compiled: CompiledLanguageModel)] = []
    /// How many compiled custom language models stay cached.
    static let compiledModelsKept = 4
    /// Told what each decode cost (the daemon's real-time factor metrics).
    private let observer: (any SpeechObserver)?
    /// Approximate memory of one per-session decoder, by asset key (read from its files once).
    private var decoderBytes: [String: Int] = [:]
    /// Loads the Whisper-class models.
    private let segmentModels: SegmentModelLoader

    /// `clock` times model lingering (``runEvictor()``); `observer` hears each decode's cost;
    /// `segmentModels` loads Whisper-class models.
    public init(settings: SpeechSettings, clock: any ServiceClock = SystemServiceClock(), observer: (any SpeechObserver)? = nil,
                segmentModels: SegmentModelLoader = .engineProcess) {
        self.settings = settings
        self.observer = observer
        self.segmentModels = segmentModels
        cache = ModelCache(lingerSeconds: settings.lingerSeconds, clock: clock, memoryBudget: settings.maxModelMemoryBytes)
        admission = Admission(limit: settings.maxConcurrentAnalyses, hardLimit: settings.maxConcurrentAnalysesHard)
        decodeGate = DecodeGate(slots: settings.decodeSlots)
        MemoryReclaim.keepLargeBlocksReturnable()
    }

    /// Opens a session, loading shared models as needed. When ``SpeechSettings/maxConcurrentAnalyses``
    /// run, it waits for a slot behind the opens queued before it (`queued` hears its place, 1 for
    /// the first), or throws `admissionLimit` when ``SpeechSettings/maxQueued`` already wait (at
    /// once for `ignoresResourceLimits`, which has its own cap). Cancelling the caller's task
    /// leaves the queue.
    public func open(_ plan: SessionPlan, queued: (@Sendable (Int) -> Void)? = nil,
                     emit: @escaping @Sendable (String, SessionEvent) -> Void) async throws -> AnalysisSession {
        if let problem = plan.options.keepAliveProblem { throw SpeechError.invalidOptions(problem) }
        try await admit(ignoresResourceLimits: plan.options.ignoresResourceLimits, queued: queued)
        let id = "s\(nextID)"
        nextID += 1
        // Hold the slot while loading, so concurrent opens respect the limit.
        opening += 1
        defer {
            opening -= 1
            wakeQueued()
        }
        var keys: [String] = []
        var batches: [BatchLanes] = []
        do {
            let (modules, streams) = try await engines(for: plan.modules, of: plan, session: id, keys: &keys, batches: &batches)
            let sensitivity = plan.modules.first { $0.configuration.kind == .detector }?.configuration.sensitivity.flatMap(VoiceSensitivity.init) ?? .medium
            guard let model = plan.vad.files["model"] else { throw SpeechError.incompleteAsset("the voice activity detector asset has no model file") }
            var configuration = SileroDetector.Configuration.transcription
            configuration.modelPath = model
            configuration.sensitivity = sensitivity
            let vad: SileroDetector
            if let spare = await cache.spareDetector(for: configuration) {
                vad = spare
            } else {
                vad = try await BlockingWork.run("earshot.vad") { [configuration] in try SileroDetector(configuration: configuration) }
            }
            let window = plan.options.input == .recording ? Int(settings.recordingWindowSeconds * Double(AnalysisSession.sampleRate)) : 0
            let session = AnalysisSession(id: id, modules: modules, vad: vad, decodeParallelism: settings.decodeSlots, recordingWindow: window,
                                          speculativeBacklog: settings.speculativeDecode ? AnalysisSession.defaultSpeculativeBacklog : nil,
                                          conditionOnPreviousText: settings.conditionOnPreviousText, observer: observer) { emit(id, $0) }
            sessions[id] = OpenSession(session: session, plan: plan, keys: keys, streams: streams, batches: batches)
            return session
        } catch {
            for key in keys { await cache.release(key, retention: .whileInUse, owner: plan.owner, uid: plan.ownerUID) }
            for batch in batches { await batch.close() }
            throw error
        }
    }

    /// The engines of `modules` for session `session` of `plan`, and the PocketSphinx decoders among
    /// them by module index; appends the cache key of every shared model acquired to `keys`, and
    /// each Whisper module's ``BatchLanes`` to `batches`.
    private func engines(for modules: [(configuration: ModuleConfiguration, asset: ModelAsset)], of plan: SessionPlan, session: String,
                         keys: inout [String], batches: inout [BatchLanes]) async throws -> ([SessionModule], [Int: PocketSphinxStream]) {
        var built: [SessionModule] = []
        var streams: [Int: PocketSphinxStream] = [:]
        for (index, module) in modules.enumerated() {
            let engine = try await engine(for: module.configuration, asset: module.asset, context: plan.context, session: session, plan: plan)
            switch engine {
            case .segments(let model):
                keys.append(Self.cacheKey(module.asset, configuration: module.configuration, threads: settings.inferenceThreads))
                if let batch = (model as? GatedTranscriber)?.batch { batches.append(batch) }
            case .streaming(let decoder): streams[index] = PocketSphinxStream.underlying(decoder)
            case .detector: break
            }
            built.append(SessionModule(index: index, configuration: module.configuration, engine: engine))
        }
        return (built, streams)
    }

    /// The engine for one module of session `session` of `plan` (both nil: preloading, no session).
    private func engine(for configuration: ModuleConfiguration, asset: ModelAsset, context: AnalysisContextData, session: String?,
                        plan: SessionPlan?) async throws -> SessionEngine {
        switch asset.kind {
        case .whisper:
            guard let encoder = asset.files["encoder"], let decoder = asset.files["decoder"], let tokens = asset.files["tokens"] else {
                throw SpeechError.incompleteAsset("\(asset.key) lacks encoder, decoder or tokens")
            }
            let files = WhisperModel.Files(encoder: encoder, decoder: decoder, tokens: tokens)
            let (language, task) = try Self.whisperSettings(configuration)
            // One load per model: language, task and search travel with each decode.
            let loader = segmentModels
            @Sendable func load(threads: Int) -> @Sendable () throws -> (any SegmentTranscribing, Int) {
                { try loader.load(files, threads) }
            }
            let threads = settings.inferenceThreads
            // Before its first load a model is expected to take four times its files (base:
            // 56 MiB of files, 150–290 MiB loaded); after, what its last load took.
            let estimate = 4 * files.byteCount
            let model = try await cache.acquire(Self.cacheKey(asset, configuration: configuration, threads: threads), family: asset.key, estimate: estimate,
                                                load: load(threads: threads))
            var transcriber = GatedTranscriber(model: model, gate: decodeGate, client: session ?? "", engine: asset.engine, observer: observer)
            transcriber.settings = Self.whisperDecodeSettings(language: language, task: task, configuration: configuration,
                                                              context: Self.whisperContext(context, configuration: configuration, plan: plan),
                                                              decoding: plan?.options.decoding, beamSize: settings.beamSize)
            // Overlapping decodes of one session (a long recording) move to a copy with fewer threads.
            let copyThreads = settings.batchThreads
            if let plan, copyThreads > 0, copyThreads < threads, settings.decodeSlots > 1 {
                let key = Self.cacheKey(asset, configuration: configuration, threads: copyThreads)
                let loadCopy = load(threads: copyThreads)
                transcriber.batch = BatchLanes(acquire: { [cache] in try await cache.acquire(key, family: asset.key, estimate: estimate, load: loadCopy) },
                                               release: { [weak self] in await self?.release([key], of: plan) })
            }
            return .segments(transcriber)
        case .pocketSphinx:
            var languageModel: (model: CompiledLanguageModel, weight: Double)?
            if let use = configuration.languageModel {
                guard let document = plan?.languageModels[use.model] else { throw SpeechError.invalidOptions("custom language model \(use.model) was not resolved") }
                languageModel = (try await compiled(use.model, document), use.weight ?? PocketSphinxDecoder.defaultCustomModelWeight)
            }
            let decoder = try await BlockingWork.run("earshot.decoder") { [languageModel] in
                try PocketSphinxEngine.decoder(files: asset.files, contextualStrings: context.allStrings, languageModel: languageModel)
            }
            return .streaming(observer.map { MeteredDecoder(decoder, engine: asset.engine, observer: $0) } ?? decoder)
        case .sileroVAD:
            return .detector
        case nil:
            throw SpeechError.unknownEngine(asset: asset.key, engine: asset.engine)
        }
    }

    /// The compiled model of prepared data `document` (handle `model`), from the cache or compiled
    /// on a thread of its own.
    private func compiled(_ model: String, _ document: CustomLanguageModelDocument) async throws -> CompiledLanguageModel {
        if let index = compiledModels.firstIndex(where: { $0.model == model }) {
            let entry = compiledModels.remove(at: index)
            compiledModels.append(entry)
            return entry.compiled
        }
        let compiled = try await BlockingWork.run("earshot.language-model") { try LanguageModelCompiler.compile(document) }
        compiledModels.removeAll { $0.model == model }
        compiledModels.append((model, compiled))
        if compiledModels.count > Self.compiledModelsKept { compiledModels.removeFirst() }
        return compiled
    }

    /// Replaces a running session's modules; new modules analyse audio from now on, removed ones
    /// stop. The session's voice activity detector (and its sensitivity) stays.
    public func replaceModules(of id: String, with modules: [(configuration: ModuleConfiguration, asset: ModelAsset)],
                               languageModels: [String: CustomLanguageModelDocument] = [:]) async throws {
        guard var entry = sessions[id] else { throw SpeechError.noSession(id) }
        entry.plan.languageModels = languageModels
        var keys: [String] = []
        var batches: [BatchLanes] = []
        let built: [SessionModule]
        let streams: [Int: PocketSphinxStream]
        do {
            (built, streams) = try await engines(for: modules, of: entry.plan, session: id, keys: &keys, batches: &batches)
        } catch {
            for key in keys { await cache.release(key, retention: .whileInUse, owner: entry.plan.owner, uid: entry.plan.ownerUID) }
            for batch in batches { await batch.close() }
            throw error
        }
        await entry.session.setModules(built)
        var plan = entry.plan
        plan.modules = modules
        sessions[id] = OpenSession(session: entry.session, plan: plan, keys: keys, streams: streams, batches: batches)
        await release(entry.keys, of: plan)
        for batch in entry.batches { await batch.close() }
    }

    /// Gives a running session a new context: its PocketSphinx decoders prepare it now (missing
    /// words pronounced) and use it from their next utterance.
    public func setContext(of id: String, _ context: AnalysisContextData) async throws {
        guard let entry = sessions[id] else { throw SpeechError.noSession(id) }
        let strings = context.allStrings
        for stream in entry.streams.values {
            _ = try await BlockingWork.run("earshot.context") { try stream.setContext(strings) }
        }
        sessions[id]?.plan.context = context
    }

    /// What session `id`'s modules ask for that their engines do not do: transcription options
    /// the engine does not implement, contextual strings Whisper cannot take and words
    /// PocketSphinx cannot use (empty for an unknown session).
    public func unhonored(_ id: String) -> [UnhonoredRequest] {
        guard let entry = sessions[id] else { return [] }
        return entry.plan.modules.enumerated().flatMap { index, module in
            EngineCapabilities.unhonored(module.configuration, engine: module.asset.engine, module: index,
                                         context: Self.whisperContext(entry.plan.context, configuration: module.configuration, plan: entry.plan),
                                         decoding: entry.plan.options.decoding, unusableWords: entry.streams[index]?.unhonored ?? [])
        }
    }

    /// Models are shared between sessions that load the same asset with the same thread count
    /// (a Whisper model's language, task and search are per decode).
    static func cacheKey(_ asset: ModelAsset, configuration: ModuleConfiguration, threads: Int) -> String {
        "\(asset.key)/threads=\(threads)"
    }

    /// A Whisper module's decode settings: its language ("" to identify) and task, the session's
    /// decoding options over the daemon's beam (`beamSize`), its contextual strings (within
    /// ``WhisperContext``'s bounds) and, when it reports alternatives, four of them (from a beam
    /// of at least 5).
    /// The contextual strings a Whisper module decodes with: the session's, then its custom
    /// language model's phrases and words (``CustomLanguageModelDocument/biasPhrases``), which
    /// Whisper's bounds may leave unhonoured (and reported) where the session's own come first.
    static func whisperContext(_ context: AnalysisContextData, configuration: ModuleConfiguration, plan: SessionPlan?) -> AnalysisContextData {
        guard let use = configuration.languageModel, let document = plan?.languageModels[use.model] else { return context }
        var combined = AnalysisContextData(contextualStrings: ["general": context.allStrings])
        combined.contextualStrings["language-model"] = document.biasPhrases
        return combined
    }

    static func whisperDecodeSettings(language: String?, task: WhisperModel.Task, configuration: ModuleConfiguration,
                                      context: AnalysisContextData, decoding: DecodingOptions?, beamSize: Int) -> DecodeSettings {
        let wantsAlternatives = configuration.reportingOptions.contains("alternativeTranscriptions")
        let beam = decoding?.beamSize ?? beamSize
        let temperatures = decoding?.temperature.flatMap { $0 > 0 ? [$0] : nil }
        return DecodeSettings(language: language ?? "", task: task, beamSize: wantsAlternatives ? max(beam, 5) : beam, temperatures: temperatures,
                              prompt: decoding?.prompt, context: WhisperContext.honoured(context.allStrings), alternatives: wantsAlternatives ? 4 : nil)
    }

    /// The Whisper language (nil: identify it) and task for a module: its locale's language, or
    /// identification for `und`; translation when the module asks for it.
    static func whisperSettings(_ configuration: ModuleConfiguration) throws -> (String?, WhisperModel.Task) {
        let task: WhisperModel.Task = configuration.transcriptionOptions.contains(ModuleConfiguration.translateOption) ? .translate : .transcribe
        let locale = configuration.locale ?? "en"
        if LocaleTag(locale)?.language == LocaleTag.undetermined { return (nil, task) }
        guard let code = WhisperLanguage.whisperCode(for: locale) else {
            throw SpeechError.unsupportedLocale("Whisper does not transcribe \(locale)")
        }
        return (code, task)
    }

    /// How many shared models session `id` uses (what retention and a keep-alive keep loaded;
    /// PocketSphinx decoders are the session's own).
    public func sharedModelCount(of id: String) -> Int { sessions[id]?.keys.count ?? 0 }


    /// Slots taken: sessions open, opening, and handed to woken waiters.
    private var slotsTaken: Int { sessions.count + opening + queue.handedOver }

    /// Returns once a session may open: at once when a slot is free and nobody waits for one,
    /// else after the opens queued before it.
    private func admit(ignoresResourceLimits: Bool, queued: (@Sendable (Int) -> Void)?) async throws {
        if ignoresResourceLimits || queue.count == 0, admission.admits(open: slotsTaken, ignoresResourceLimits: ignoresResourceLimits) { return }
        guard !ignoresResourceLimits, queue.count < settings.maxQueued else {
            throw SpeechError.admissionLimit(open: slotsTaken, limit: ignoresResourceLimits ? admission.hardLimit : admission.limit, queued: queue.count)
        }
        let ticket = queue.ticket()
        queued?(queue.count + 1)
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                queue.enqueue(ticket, continuation)
            }
        } onCancel: {
            Task { await self.leaveQueue(ticket) }
        }
        queue.tookSlot()
        // A waiter woken as its caller went away gives the slot to the next.
        if Task.isCancelled {
            wakeQueued()
            throw CancellationError()
        }
    }

    private func leaveQueue(_ ticket: Int) { _ = queue.cancel(ticket) }

    /// Hands a free slot to the first open waiting for one.
    private func wakeQueued() {
        queue.wakeFirst(if: admission.admits(open: slotsTaken, ignoresResourceLimits: false))
    }

    /// Forgets a finished session and releases its models per its retention; its voice activity
    /// detector serves the next session while a model stays loaded (call on `finished`).
    public func close(_ id: String) async {
        guard let entry = sessions.removeValue(forKey: id) else { return }
        wakeQueued()
        await release(entry.keys, of: entry.plan)
        for batch in entry.batches { await batch.close() }
        if let detector = await entry.session.releaseDetector() {
            await cache.keepSpare(detector)
        } else {
            // Abandoned: its detector comes back once the queued work and the finish are done,
            // from a task nobody waits for, so neither this close nor a shutdown waits behind a
            // busy queue (a new detector costs the next open ~120 ms of ONNX Runtime graph building).
            let session = entry.session, cache = cache
            Task { if let detector = await session.releaseDetectorAfterQueuedWork() { await cache.keepSpare(detector) } }
        }
    }

    /// Releases a session's models per its retention and granted keep-alive.
    private func release(_ keys: [String], of plan: SessionPlan) async {
        let keepAlive = settings.keepAlive(granting: plan.options).map { Duration.seconds($0.seconds) }
        for key in keys { await cache.release(key, retention: plan.options.modelRetention, keepAlive: keepAlive, owner: plan.owner, uid: plan.ownerUID) }
    }

    /// Connection `owner` went away: its sessions end and its `processLifetime` models may go.
    public func ownerGone(_ owner: SessionOwner) async {
        for (id, entry) in sessions where entry.plan.owner == owner {
            entry.session.abandon()
            await close(id)
        }
        await cache.ownerGone(owner)
    }

    /// Preloads the models a plan needs (`prepareToAnalyze`), kept `lingering`.
    public func prepare(_ plan: SessionPlan) async throws {
        for (configuration, asset) in plan.modules where asset.kind == .whisper {
            if case .segments = try await engine(for: configuration, asset: asset, context: plan.context, session: nil, plan: nil) {
                await cache.release(Self.cacheKey(asset, configuration: configuration, threads: settings.inferenceThreads), retention: .lingering, owner: plan.owner, uid: plan.ownerUID)
            }
        }
    }

    /// `SpeechModels.endRetention()` for user `uid`: drops the retention that user's sessions asked
    /// for (other users' lingering models stay); returns how many models stay loaded.
    @discardableResult
    public func endRetention(uid: UInt32) async -> Int {
        await cache.endRetention(uid: uid)
        return await cache.loaded.count
    }

    /// Unloads lingering models when their time is up, until the task is cancelled.
    public func runEvictor() async { await cache.runEvictor() }

    public func stats() async -> SpeechStats {
        await cache.evict()
        let shared = await cache.loaded.map { SpeechStats.Model(key: $0.key, users: $0.users, memoryBytes: $0.memoryBytes) }
        var byEngine: [String: Int] = [:]
        var decoders: [String: (users: Int, files: [String: String])] = [:]
        for entry in sessions.values {
            for engine in Set(entry.plan.modules.map(\.asset.engine)) { byEngine[engine, default: 0] += 1 }
            for asset in Set(entry.plan.modules.map(\.asset)) where asset.kind == .pocketSphinx {
                decoders[asset.key, default: (0, asset.files)].users += 1
            }
        }
        for (key, decoder) in decoders where decoderBytes[key] == nil {
            let files = decoder.files
            decoderBytes[key] = await BlockingWork.run("earshot.stats") { PocketSphinxEngine.memoryBytes(files: files) }
        }
        let perSession = decoders.map { key, decoder in
            SpeechStats.Model(key: key + "/per-session", users: decoder.users, memoryBytes: decoder.users * (decoderBytes[key] ?? 0))
        }
        return SpeechStats(sessions: sessions.count, sessionsByEngine: byEngine, models: shared + perSession.sorted { $0.key < $1.key }, loads: await cache.loads,
                          spareDetectors: await cache.spareDetectorCount)
    }
}

