import EarshotAssets
import EarshotLanguageModel
import EarshotSpeech
import EarshotSystem
import EarshotWire
import Foundation

/// The connection a session belongs to and who is on it.
struct AnalysisClient: Sendable {
    let connection: Int
    let uid: UInt32
    let appID: String?
}

/// What a session tells its client. The coordinator knows no transport: the harness that opened
/// the session encodes these.
enum AnalysisEvent: Sendable {
    case result(AnalyzerResult)
    case volatileRange(WireTimeRange?)
    /// The session ended: `error` when a failure ended it; `shutdown` when the daemon's shutdown
    /// finished it (through the end of its input).
    case finished((any Error)?, shutdown: Bool)
}

/// Why the coordinator refused a request (``ErrorMap`` gives each its wire code).
enum AnalysisError: Error, Sendable, CustomStringConvertible {
    case noModules
    /// Only detectors: nothing would transcribe.
    case detectorOnly
    /// The connection has no open session with this id.
    case noSession(String)
    case shuttingDown

    var description: String {
        switch self {
        case .noModules: "a session needs at least one module"
        case .detectorOnly: "a SpeechDetector only works together with a SpeechTranscriber or DictationTranscriber"
        case .noSession(let id): "no open analysis session '\(id)' on this connection"
        case .shuttingDown: "earshotd is shutting down"
        }
    }
}

/// A control request on a running session (`earshot.analyzer.control`, already validated).
enum AnalysisControl: Sendable {
    case finalize(through: WireTime?)
    case finish(FinishMode, time: WireTime?)
    case cancel(before: WireTime)
    case setModules([ModuleConfiguration])
    case setContext(AnalysisContextData)
}

/// Owns every analysis session from lease to release: leases the assets, has ``SpeechService``
/// admit and open the session, feeds and controls it, and gives everything back when it finishes,
/// when its connection closes, or at the shutdown deadline. Sessions are kept per connection: a
/// client reaches only its own.
actor AnalysisCoordinator {
    struct OpenSession: Sendable {
        let session: AnalysisSession
        /// One per module, in module order.
        var moduleLeases: [AssetLease]
        /// The voice activity detector's.
        let vadLease: AssetLease
        /// The owner's uid (whose custom language models the session may use).
        let uid: UInt32
        /// Set when shutdown finishes the session, so its `finished` event says so.
        let shutdownMark: OnceFlag
        var leases: [AssetLease] { moduleLeases + [vadLease] }
        /// The first module's engine (the label of its metrics).
        var engine: String { moduleLeases.first?.entry.engine ?? "unknown" }
    }

    let speech: SpeechService
    let assets: AssetService
    /// Every open session, by connection then session id (the one registry; readable from any thread).
    nonisolated let sessions = SessionTable<OpenSession>()
    private var shuttingDown = false
    private var drainWaiters: [CheckedContinuation<Void, Never>] = []
    /// Sessions whose `finished` event went out, released by ``run()``.
    private let ended: AsyncStream<(connection: Int, session: String)>
    private let endedContinuation: AsyncStream<(connection: Int, session: String)>.Continuation

    /// Where sessions, audio and result latencies are counted (nil: not counted).
    let metrics: DaemonMetrics?

    init(speech: SpeechService, assets: AssetService, metrics: DaemonMetrics? = nil) {
        self.speech = speech
        self.assets = assets
        self.metrics = metrics
        (ended, endedContinuation) = AsyncStream.makeStream()
    }

    /// Releases sessions as they finish; returns once shutdown has begun and no session is left.
    func run() async {
        for await (connection, session) in ended { await release(session, of: connection) }
    }

    /// Leases the assets `modules` need, has the speech service admit and open a session on them,
    /// and returns its id. `events` receives everything the session reports, ending with `finished`.
    /// `resolvedAs`, when given, is what the assets are chosen by instead (one per module): a
    /// transcription request names its asset through the asset's preferred preset, whose reporting
    /// (volatile results, for `progressiveTranscription`) it does not want.
    func open(_ modules: [ModuleConfiguration], resolvedAs resolution: [ModuleConfiguration]? = nil, options: AnalysisOptions, context: AnalysisContextData,
              for client: AnalysisClient, queued: (@Sendable (Int) -> Void)? = nil,
              events: @escaping @Sendable (String, AnalysisEvent) -> Void) async throws -> String {
        guard !shuttingDown else { throw AnalysisError.shuttingDown }
        guard !modules.isEmpty else { throw AnalysisError.noModules }
        guard modules.contains(where: { $0.kind != .detector }) else { throw AnalysisError.detectorOnly }
        var leases: [AssetLease] = []
        do {
            precondition(resolution.map { $0.count == modules.count } ?? true, "one resolution per module")
            let planned = zip(modules, try await leaseModules(resolution ?? modules, into: &leases)).map { (configuration: $0, asset: $1.asset) }
            let vadLease = try await assets.lease(ModuleConfiguration(kind: .detector, locale: nil))
            leases.append(vadLease)
            if let appID = client.appID {
                await assets.noteUse(of: modules, by: ClientIdentity(uid: client.uid, appID: appID))
            }
            let plan = SessionPlan(modules: planned, vad: Self.modelAsset(vadLease), options: options, context: context,
                                   owner: SessionOwner(token: client.connection), ownerUID: client.uid,
                                   languageModels: try await languageModelDocuments(for: modules, uid: client.uid))
            let mark = OnceFlag()
            let connection = client.connection
            let ended = endedContinuation
            let engine = planned.first?.asset.engine ?? "unknown"
            let firstResult = OnceFlag() // the first final result was counted
            let opened = ContinuousClock.now
            let metrics = self.metrics
            let session = try await speech.open(plan, queued: queued) { id, event in
                switch event {
                case .result(let result):
                    if result.isFinal, !result.text.isEmpty, !firstResult.isSet {
                        firstResult.set()
                        metrics?.firstResultSeconds.observe((ContinuousClock.now - opened) / .seconds(1), engine)
                    }
                    events(id, .result(result))
                case .volatileRange(let range): events(id, .volatileRange(range))
                case .finished(let error):
                    events(id, .finished(error, shutdown: mark.isSet))
                    ended.yield((connection, id))
                }
            }
            guard !shuttingDown else {
                session.abandon()
                await speech.close(session.id)
                throw AnalysisError.shuttingDown
            }
            sessions[connection, session.id] = OpenSession(session: session, moduleLeases: Array(leases.dropLast()), vadLease: vadLease, uid: client.uid, shutdownMark: mark)
            metrics?.sessionsOpened.add(1, engine)
            return session.id
        } catch {
            for lease in leases { await assets.endLease(lease) }
            throw error
        }
    }

    /// Appends PCM to a session (waiting while the session's backlog is full); false when the
    /// connection has no such session (never opened, or already ended).
    func feed(_ pcm: [UInt8], format: AudioFormatSpec, start: WireTime?, session id: String, of connection: Int) async -> Bool {
        guard let open = sessions[connection, id] else { return false }
        await open.session.accept(pcm, format: format, start: start)
        let bytesPerSecond = format.rate * format.width * format.channels
        if bytesPerSecond > 0 { metrics?.audioSeconds.add(Double(pcm.count) / Double(bytesPerSecond), open.engine) }
        return true
    }

    /// Applies `control` to a session; returns its last sample time where the action has one.
    func control(_ control: AnalysisControl, session id: String, of connection: Int) async throws -> WireTime? {
        let open = try session(id, of: connection)
        let session = open.session
        switch control {
        case .finalize(let time):
            return await session.finalize(through: time)
        case .finish(let mode, let time):
            let began = ContinuousClock.now
            let last = await session.finish(mode, time: time)
            if let engine = sessions[connection, id]?.engine { metrics?.finalResultSeconds.observe((ContinuousClock.now - began) / .seconds(1), engine) }
            // Finished when `finish` returns: give back what it held now, not when run() gets to it.
            await release(id, of: connection)
            return last
        case .cancel(let time):
            session.cancelAnalysis(before: time)
            return nil
        case .setModules(let modules):
            var leases: [AssetLease] = []
            do {
                let planned = try await leaseModules(modules, into: &leases)
                try await speech.replaceModules(of: id, with: planned, languageModels: try await languageModelDocuments(for: modules, uid: open.uid))
            } catch {
                for lease in leases { await assets.endLease(lease) }
                throw error
            }
            let old = sessions[connection, id]?.moduleLeases ?? []
            if var updated = sessions[connection, id] {
                updated.moduleLeases = leases
                sessions[connection, id] = updated
            }
            for lease in old { await assets.endLease(lease) }
            return nil
        case .setContext(let context):
            try await speech.setContext(of: id, context)
            return nil
        }
    }

    /// Ends a session without finalizing (the client started over) and releases it.
    func cancel(_ id: String, of connection: Int) async {
        sessions[connection, id]?.session.abandon()
        await release(id, of: connection)
    }

    /// Connection `connection` closed: its sessions end and everything they held goes back.
    func connectionClosed(_ connection: Int) async {
        for (id, open) in sessions.sessions(of: connection) {
            open.session.abandon()
            await release(id, of: connection)
        }
        await speech.ownerGone(SessionOwner(token: connection))
    }

    /// Shutdown: no new sessions, and every open one is finished through the end of its input, so
    /// its final results reach its client. Returns at once; ``drained()`` says when all are done.
    func beginShutdown() {
        shuttingDown = true
        for open in sessions.all.map(\.entry) {
            open.shutdownMark.set()
            // Not awaited here: the shutdown deadline must not wait for a session's queue.
            Task { _ = await open.session.finish(.finalizeThroughEndOfInput, time: nil) }
        }
        if sessions.isEmpty { endedContinuation.finish() }
    }

    /// Returns once no session is open (finished, cancelled or its connection closed).
    func drained() async {
        guard !sessions.isEmpty else { return }
        await withCheckedContinuation { drainWaiters.append($0) }
    }

    /// The shutdown deadline passed: every session still running ends now, unfinalized.
    func cancelAll() async {
        for (connection, id, open) in sessions.all {
            open.session.abandon()
            await release(id, of: connection)
        }
    }

    // MARK: Internals

    private func session(_ id: String, of connection: Int) throws -> OpenSession {
        guard let open = sessions[connection, id] else { throw AnalysisError.noSession(id) }
        return open
    }

    /// Releases what session `id` held (once; later calls do nothing).
    private func release(_ id: String, of connection: Int) async {
        guard let open = sessions.remove(id, of: connection) else { return }
        await speech.close(id)
        for lease in open.leases { await assets.endLease(lease) }
        if sessions.isEmpty {
            for waiter in drainWaiters { waiter.resume() }
            drainWaiters = []
            if shuttingDown { endedContinuation.finish() } // ends run()
        }
    }

    /// Leases each module's asset (appending to `leases`, so a caller can give them back on failure).
    /// The prepared data of every custom language model `modules` name, as `uid` prepared it
    /// (another uid's is not found). Dictation interpolates it at a weight in (0, 1); a
    /// transcriber (Whisper) takes its phrases as contextual strings, with no weight.
    private func languageModelDocuments(for modules: [ModuleConfiguration], uid: UInt32) async throws -> [String: CustomLanguageModelDocument] {
        var documents: [String: CustomLanguageModelDocument] = [:]
        for module in modules {
            guard let use = module.languageModel else { continue }
            guard module.kind != .detector else { throw WireError(.badRequest, "a detector module takes no custom language model") }
            if module.kind == .transcriber, use.weight != nil {
                throw WireError(.badRequest, "a transcriber takes a custom language model's phrases as contextual strings, with no weight; weights are for dictation")
            }
            if let weight = use.weight, !(weight > 0 && weight < 1) {
                throw WireError(.badRequest, "a custom language model's weight must be between 0 and 1 (exclusive), not \(weight)")
            }
            let document = try await assets.languageModels.document(use.model, uid: uid)
            if let locale = module.locale, Locale.Components(identifier: locale).languageComponents.languageCode != Locale.Components(identifier: document.locale).languageComponents.languageCode {
                throw WireError(.badRequest, "custom language model \(use.model) is for \(document.locale), not for the module's \(locale)")
            }
            documents[use.model] = document
        }
        return documents
    }

    private func leaseModules(_ modules: [ModuleConfiguration], into leases: inout [AssetLease]) async throws -> [(configuration: ModuleConfiguration, asset: ModelAsset)] {
        var planned: [(configuration: ModuleConfiguration, asset: ModelAsset)] = []
        for module in modules {
            let lease = try await assets.lease(module)
            leases.append(lease)
            planned.append((module, Self.modelAsset(lease)))
        }
        return planned
    }

    private static func modelAsset(_ lease: AssetLease) -> ModelAsset {
        ModelAsset(key: lease.key, engine: lease.entry.engine, files: lease.entry.files.mapValues { lease.path + "/" + $0 })
    }
}
