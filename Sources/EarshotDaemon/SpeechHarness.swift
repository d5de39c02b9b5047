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

    var routes: [Route] {
        let harness = self
        return [
            .on(AnalyzerOpen.self, .admin("ignore resource limits; open the session without ignoresResourceLimits", when: { request, _ in request.options.ignoresResourceLimits })) { request, _, context in
                let channel = context.state.channel
                let connection = context.connectionID
                let session = try await harness.coordinator.open(request.modules, options: request.options, context: request.context, for: context.client) { id, event in
                    if let frame = harness.frame(for: event, session: id, connection: connection) { channel.post(frame) }
                }
                // A keep-alive keeps shared models; a session without any is told none was granted.
                let keepAlive = await harness.speech.sharedModelCount(of: session) > 0 ? harness.speech.settings.keepAlive(granting: request.options) : nil
                return [try Frame(AnalyzerOpened(id: request.id, session: session, audioFormats: [.speech16k],
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
                return [try Frame(AnalyzerControlDone(id: control.id, session: control.session, lastSampleTime: last))]
            },
            .on(StatsRequest.self) { request, _, _ in
                let stats = await harness.speech.stats()
                // Count what freed engines gave back, not what a queued trim is about to.
                await MemoryReclaim.settled()
                let memory = ProcessFacts.residentMemory()
                return [try Frame(StatsReply(id: request.id, sessions: stats.sessions,
                                             models: stats.models.map { LoadedModelInfo(key: $0.key, users: $0.users, memoryBytes: $0.memoryBytes) },
                                             modelLoads: stats.loads, residentBytes: ProcessFacts.residentBytes(),
                                             anonymousBytes: memory.anonymousBytes, fileBytes: memory.fileBytes, liveObjects: LiveObjects.counts))]
            },
            .on(EndRetentionRequest.self) { request, _, context in
                [try Frame(EndRetentionReply(id: request.id, modelsLoaded: await harness.speech.endRetention(uid: context.peer.uid)))]
            },
        ] + WyomingTranscriber(coordinator: coordinator).routes
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
