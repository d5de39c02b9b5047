import EarshotSpeech
import EarshotSystem
import EarshotWire
import Foundation

/// Analysis routes (`earshot.analyzer.*`, stats, end-retention) and the Wyoming ASR ones: decode,
/// call ``AnalysisCoordinator`` (or ``SpeechService`` for its statistics), encode.
struct SpeechHarness: Sendable {
    let speech: SpeechService
    let coordinator: AnalysisCoordinator
    let errors: ErrorMap
    /// Where requests a session's engines do not honour are logged (nil: not logged).
    var logger: Logger?

    var routes: [Route] {
        let harness = self
        return [
            .on(AnalyzerOpen.self, .admin("ignore resource limits; open the session without ignoresResourceLimits", when: { request, _ in request.options.ignoresResourceLimits })) { request, _, context in
                let channel = try context.connection.channel
                let connection = context.connectionID
                // Told while it waits for a free slot, so it can say so.
                let queued: @Sendable (Int) -> Void = { position in
                    if let frame = try? Frame(AnalyzerProgress(id: request.id, position: position)) { channel.post(frame) }
                }
                let session = try await harness.coordinator.open(request.modules, options: request.options, context: request.context, for: context.client,
                                                                 queued: queued) { id, event in
                    if let frame = harness.frame(for: event, session: id, connection: connection) { channel.post(frame) }
                }
                let unhonored = await harness.unhonored(session, uid: context.peer.uid)
                // A keep-alive keeps shared models; a session without any is told none was granted.
                let keepAlive = await harness.speech.sharedModelCount(of: session) > 0 ? harness.speech.settings.keepAlive(granting: request.options) : nil
                if let keepAlive, keepAlive.clamped, let asked = request.options.keepAliveSeconds {
                    harness.logger?.info("session \(session) of uid \(context.peer.uid): keep-alive \(asked) s cut to MaxKeepAliveSec \(keepAlive.seconds) s",
                                         ["EARSHOT_SESSION": session, "EARSHOT_KEEP_ALIVE": "\(keepAlive.seconds)"])
                }
                return [try Frame(AnalyzerOpened(id: request.id, session: session, audioFormats: [.speech16k], unhonored: unhonored,
                                                 keepAliveSeconds: keepAlive?.seconds, keepAliveClamped: keepAlive?.clamped))]
            },
            .on(AnalyzerAudio.self) { audio, call, context in
                guard await harness.coordinator.feed(call.frame.payload, format: AudioFormatSpec(rate: audio.rate, width: audio.width, channels: audio.channels),
                                                     start: audio.start, session: audio.session, of: context.connectionID) else {
                    throw AnalysisError.noSession(audio.session)
                }
                return []
            },
            .on(AnalyzerControl.self) { control, _, context in
                let last = try await harness.coordinator.control(try Self.control(control), session: control.session, of: context.connectionID)
                let changesRequests = control.action == "set-context" || control.action == "set-modules"
                let unhonored = changesRequests ? await harness.unhonored(control.session, uid: context.peer.uid) : nil
                return [try Frame(AnalyzerControlDone(id: control.id, session: control.session, lastSampleTime: last, unhonored: unhonored))]
            },
            .on(StatsRequest.self) { request, _, _ in
                // The metrics' own numbers when the daemon keeps them: one source for both.
                let stats = if let metrics = harness.coordinator.metrics {
                    await metrics.refresh(speech: harness.speech, assets: harness.coordinator.assets)
                } else {
                    await harness.speech.stats()
                }
                // Count what freed engines gave back, not what a queued trim is about to.
                await MemoryReclaim.settled()
                let memory = ProcessFacts.residentMemory()
                let engine = EngineProcess.shared.processID.map { pid in
                    let used = ProcessFacts.residentMemory(pid: pid)
                    return EngineProcessInfo(pid: pid, anonymousBytes: used.anonymousBytes, fileBytes: used.fileBytes)
                }
                let samples = harness.coordinator.metrics?.registry.samples().map {
                    MetricSampleInfo(name: $0.name, kind: $0.kind.rawValue, labels: $0.labels, value: $0.value, count: $0.count)
                }
                return [try Frame(StatsReply(id: request.id, sessions: stats.sessions,
                                             models: stats.models.map { LoadedModelInfo(key: $0.key, users: $0.users, memoryBytes: $0.memoryBytes) },
                                             modelLoads: stats.loads, residentBytes: ProcessFacts.residentBytes(),
                                             anonymousBytes: memory.anonymousBytes, fileBytes: memory.fileBytes, liveObjects: LiveObjects.counts,
                                             sessionsByEngine: stats.sessionsByEngine, metrics: samples, spareDetectors: stats.spareDetectors,
                                             engineProcess: engine))]
            },
            .on(EndRetentionRequest.self) { request, _, context in
                [try Frame(EndRetentionReply(id: request.id, modelsLoaded: await harness.speech.endRetention(uid: context.peer.uid)))]
            },
        ] + WyomingTranscriber(coordinator: coordinator).routes
    }

    /// What session `session`'s modules ask for that their engines do not do, logged in one line
    /// at info priority (`EARSHOT_SESSION`, `EARSHOT_UNHONORED`). Contextual words are counted, not
    /// named: they are often people's names.
    func unhonored(_ session: String, uid: UInt32) async -> [UnhonoredRequest] {
        let requests = await speech.unhonored(session)
        guard !requests.isEmpty else { return requests }
        let named = requests.filter { $0.kind != .contextualString }.map { "module \($0.module) \($0.kind.rawValue) \($0.value): \($0.reason)" }
        let words = requests.filter { $0.kind == .contextualString }
        let counted = Dictionary(grouping: words, by: \.module).sorted { $0.key < $1.key }.map { "module \($0.key): \($0.value.count) contextual string(s) or word(s)" }
        let summary = (named + counted).joined(separator: "; ")
        logger?.info("session \(session) of uid \(uid): not honoured: \(summary)", ["EARSHOT_SESSION": session, "EARSHOT_UNHONORED": summary])
        return requests
    }

    /// The coordinator's control for an `earshot.analyzer.control` request (or `badRequest`).
    static func control(_ control: AnalyzerControl) throws -> AnalysisControl {
        switch control.action {
        case "finalize":
            return .finalize(through: control.time)
        case "finish":
            let mode = control.mode ?? .finalizeThroughEndOfInput
            if mode == .finalizeThrough || mode == .after, control.time == nil {
                throw WireError(.badRequest, "finish mode \(mode.rawValue) needs a time")
            }
            return .finish(mode, time: control.time)
        case "cancel-before":
            guard let time = control.time else { throw WireError(.badRequest, "cancel-before needs a time") }
            return .cancel(before: time)
        case "set-modules":
            guard let modules = control.modules, modules.contains(where: { $0.kind != .detector }) else {
                throw WireError(.badRequest, "set-modules needs modules, at least one of them a transcriber or dictation")
            }
            return .setModules(modules)
        case "set-context":
            return .setContext(control.context ?? AnalysisContextData())
        default:
            throw WireError(.badRequest, "unknown analyzer action '\(control.action)' (finalize, finish, cancel-before, set-modules, set-context)")
        }
    }

    /// The frame for a session event (a session's failure mapped by ``ErrorMap``).
    func frame(for event: AnalysisEvent, session: String, connection: Int) -> Frame? {
        switch event {
        case .result(let result): try? Frame(result)
        case .volatileRange(let range): try? Frame(AnalyzerVolatileRange(session: session, range: range))
        case .finished(let error, _):
            try? Frame(AnalyzerFinished(session: session, error: error.map { ErrorEvent(errors.wire($0, ["session": session, "connection": "\(connection)"])) }))
        }
    }
}
