import EarshotAssets
import EarshotAudio
import EarshotSpeech
import EarshotSystem
import EarshotWire
import Foundation

/// Analysis requests (`earshot.analyzer.*`) and the Wyoming ASR path: lease the assets, open
/// sessions on ``SpeechService``, route audio, turn session events into frames.
struct SpeechHarness: Sendable {
    let speech: SpeechService
    let assets: AssetService
    let errors: ErrorMap

    /// Handles `frame` if it is a speech request: replies (possibly none), or nil if not one.
    func handle(_ frame: Frame, context: RequestContext) async throws -> [Frame]? {
        let state = context.state
        switch frame.type {
        case AnalyzerOpen.eventType:
            let request = try frame.decode(AnalyzerOpen.self)
            let channel = state.channel
            let connectionID = context.connectionID
            // The state holds the session, which holds this handler: no strong reference back.
            let session = try await open(request.modules, options: request.options, context: request.context, requester: context) { [weak state] id, event in
                if let reply = self.frame(for: event, session: id, connection: connectionID) { channel.post(reply) }
                if case .finished = event { state?.sessionFinished(id) }
            }
            return [try Frame(AnalyzerOpened(id: request.id, session: session.id, audioFormats: [.speech16k]))]
        case AnalyzerAudio.eventType:
            let audio = try frame.decode(AnalyzerAudio.self)
            guard let session = state.session(audio.session) else {
                throw WireError(.notFound, "no open analysis session '\(audio.session)' on this connection")
            }
            await session.accept(frame.payload, format: AudioFormatSpec(rate: audio.rate, width: audio.width, channels: audio.channels), start: audio.start)
            return []
        case AnalyzerControl.eventType:
            let control = try frame.decode(AnalyzerControl.self)
            guard let session = state.session(control.session) else {
                throw WireError(.notFound, "no open analysis session '\(control.session)' on this connection")
            }
            let last = try await self.control(control, session: session, requester: context)
            return [try Frame(AnalyzerControlDone(id: control.id, session: control.session, lastSampleTime: last))]
        case StatsRequest.eventType:
            let request = try frame.decode(StatsRequest.self)
            let stats = await speech.stats()
            // Count what freed engines gave back, not what a queued trim is about to.
            await MemoryReclaim.settled()
            let memory = ProcessFacts.residentMemory()
            return [try Frame(StatsReply(id: request.id, sessions: stats.sessions,
                                         models: stats.models.map { LoadedModelInfo(key: $0.key, users: $0.users, memoryBytes: $0.memoryBytes) },
                                         modelLoads: stats.loads, residentBytes: ProcessFacts.residentBytes(),
                                         anonymousBytes: memory.anonymousBytes, fileBytes: memory.fileBytes, liveObjects: LiveObjects.counts))]
        case EndRetentionRequest.eventType:
            let request = try frame.decode(EndRetentionRequest.self)
            return [try Frame(EndRetentionReply(id: request.id, modelsLoaded: await speech.endRetention(uid: context.peer.uid)))]
        case Transcribe.eventType, AudioStart.eventType, AudioChunk.eventType, AudioStop.eventType:
            return try await WyomingTranscriber(harness: self).handle(frame, context: context)
        default:
            return nil
        }
    }

    /// Leases the assets `modules` need and opens a session on them.
    func open(_ modules: [ModuleConfiguration], options: AnalysisOptions, context analysisContext: AnalysisContextData, requester: RequestContext,
              emit: @escaping @Sendable (String, SessionEvent) -> Void) async throws -> AnalysisSession {
        guard !modules.isEmpty else { throw WireError(.badRequest, "a session needs at least one module") }
        // Beyond MaxConcurrentAnalyses up to the hard cap: a privilege, never self-declared.
        if options.ignoresResourceLimits, !requester.admin {
            throw WireError(.permissionDenied, "only admins may ignore resource limits (root, the daemon's user or members of the admin group); open the session without ignoresResourceLimits")
        }
        guard modules.contains(where: { $0.kind != .detector }) else {
            throw WireError(.badRequest, "a SpeechDetector only works together with a SpeechTranscriber or DictationTranscriber")
        }
        var leases: [AssetLease] = []
        do {
            let planned = try await leaseModules(modules, into: &leases)
            let vadLease = try await assets.lease(ModuleConfiguration(kind: .detector, locale: nil))
            leases.append(vadLease)
            if let appID = requester.appID {
                await assets.noteUse(of: modules, by: ClientIdentity(uid: requester.peer.uid, appID: appID))
            }
            let plan = SessionPlan(modules: planned, vad: Self.modelAsset(vadLease), options: options, context: analysisContext, owner: requester.connectionID, ownerUID: requester.peer.uid)
            let session = try await speech.open(plan, emit: emit)
            requester.state.add(session.id, ConnectionState.OpenSession(session: session, moduleLeases: Array(leases.dropLast()), vadLease: vadLease))
            return session
        } catch {
            for lease in leases { await assets.endLease(lease) }
            throw error
        }
    }

    /// Leases each module's asset (appending to `leases`, so a caller can give them back on failure).
    private func leaseModules(_ modules: [ModuleConfiguration], into leases: inout [AssetLease]) async throws -> [(configuration: ModuleConfiguration, asset: ModelAsset)] {
        var planned: [(configuration: ModuleConfiguration, asset: ModelAsset)] = []
        for module in modules {
            let lease = try await assets.lease(module)
            leases.append(lease)
            planned.append((module, Self.modelAsset(lease)))
        }
        return planned
    }

    static func modelAsset(_ lease: AssetLease) -> ModelAsset {
        ModelAsset(key: lease.key, engine: lease.entry.engine, files: lease.entry.files.mapValues { lease.path + "/" + $0 })
    }

    private func control(_ control: AnalyzerControl, session: AnalysisSession, requester: RequestContext) async throws -> WireTime? {
        switch control.action {
        case "finalize":
            return await session.finalize(through: control.time)
        case "finish":
            let mode = control.mode ?? .finalizeThroughEndOfInput
            if mode == .finalizeThrough || mode == .after, control.time == nil {
                throw WireError(.badRequest, "finish mode \(mode.rawValue) needs a time")
            }
            return await session.finish(mode, time: control.time)
        case "cancel-before":
            guard let time = control.time else { throw WireError(.badRequest, "cancel-before needs a time") }
            session.cancelAnalysis(before: time)
            return nil
        case "set-modules":
            guard let modules = control.modules, modules.contains(where: { $0.kind != .detector }) else {
                throw WireError(.badRequest, "set-modules needs modules, at least one of them a transcriber or dictation")
            }
            var leases: [AssetLease] = []
            do {
                let planned = try await leaseModules(modules, into: &leases)
                try await speech.replaceModules(of: control.session, with: planned)
            } catch {
                for lease in leases { await assets.endLease(lease) }
                throw error
            }
            for old in requester.state.replaceModuleLeases(control.session, with: leases) { await assets.endLease(old) }
            return nil
        case "set-context":
            try await speech.setContext(of: control.session, control.context ?? AnalysisContextData())
            return nil
        default:
            throw WireError(.badRequest, "unknown analyzer action '\(control.action)' (finalize, finish, cancel-before, set-modules, set-context)")
        }
    }

    /// Releases what a finished session held.
    func cleanUp(_ id: String, state: ConnectionState) async {
        guard let open = state.remove(id) else { return }
        await speech.close(id)
        for lease in open.leases { await assets.endLease(lease) }
    }

    /// The connection closed: its sessions end and everything they held is released.
    func connectionClosed(_ state: ConnectionState) async {
        state.endCleanups()
        for open in state.removeAll() {
            open.session.abandon()
            await speech.close(open.session.id)
            for lease in open.leases { await assets.endLease(lease) }
        }
        // The Wyoming session was in the table above; the job only lets go of it and its converter.
        _ = state.wyoming?.close()
        state.wyoming = nil
        await speech.ownerGone(state.owner)
    }

    /// The frame for a session event (a session's failure mapped by ``ErrorMap``).
    func frame(for event: SessionEvent, session: String, connection: Int) -> Frame? {
        switch event {
        case .result(let result): try? Frame(result)
        case .volatileRange(let range): try? Frame(AnalyzerVolatileRange(session: session, range: range))
        case .finished(let error):
            try? Frame(AnalyzerFinished(session: session, error: error.map { ErrorEvent(errors.wire($0, ["session": session, "connection": "\(connection)"])) }))
        }
    }
}
