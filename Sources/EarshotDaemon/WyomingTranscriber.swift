import Dispatch
import EarshotAssets
import EarshotAudio
import EarshotSystem
import EarshotWire
import Foundation

/// The text and languages of a Wyoming transcription, filled by the session's event handler.
/// (Separate from ``WyomingTranscription``, so the session's handler does not keep the job's
/// converter alive.)
final class CollectedTranscript: @unchecked Sendable {
    // @unchecked: every stored var is only touched while holding `lock`.
    private let lock = NSLock()
    /// The language the client asked for.
    private let requested: String?
    private var texts: [String] = []
    /// Seconds of speech per language the engine reported.
    private var languages: [String: Double] = [:]
    private var claimed = false

    init(language: String?) { requested = language }

    func append(_ result: AnalyzerResult) {
        lock.withLock {
            texts.append(result.text)
            if let language = result.language { languages[language, default: 0] += (result.range.end - result.range.start).seconds }
        }
    }

    /// The `transcript` event: the text so far, in the language asked for, else the one most of
    /// the speech was identified as.
    var transcript: Transcript {
        lock.withLock {
            Transcript(text: texts.joined(separator: " "),
                       language: requested ?? languages.max { $0.value == $1.value ? $0.key > $1.key : $0.value < $1.value }?.key)
        }
    }

    /// True the first time only: whoever gets it sends the `transcript` (`audio-stop`, or the
    /// daemon's shutdown finishing the session), or drops it (the client started over).
    func claim() -> Bool {
        lock.withLock {
            defer { claimed = true }
            return !claimed
        }
    }
}

/// A Wyoming ASR transcription in progress on a connection: its session's id and the converter
/// that turns the client's PCM into the analyzer's 16 kHz mono s16le on the job's own queue.
final class WyomingTranscription: @unchecked Sendable {
    // @unchecked: the mutable state is only touched while holding `lock`; the converter is used
    // only on `queue`.
    let name: String?
    let language: String?
    /// The request's `transcript_names` and `transcript_terms`.
    let phrases: [String]
    let collected: CollectedTranscript
    /// Conversion (samples, downmix, libsoxr) runs here, never on the cooperative pool.
    private let queue = DispatchQueue(label: "earshot.wyoming.convert")
    private let lock = NSLock()
    private var storedSession: String?
    private var storedFormat: AudioFormatFields?
    private var converter: PCMConverter?

    init(name: String?, language: String?, phrases: [String] = []) {
        self.name = name
        self.language = language
        self.phrases = phrases
        collected = CollectedTranscript(language: language)
        LiveObjects.created("WyomingTranscription")
    }

    deinit { LiveObjects.destroyed("WyomingTranscription") }

    /// The session's id, once audio started.
    var session: String? { lock.withLock { storedSession } }
    var format: AudioFormatFields? { lock.withLock { storedFormat } }

    func started(_ session: String, format: AudioFormatFields, converter: PCMConverter) {
        lock.withLock {
            storedSession = session
            storedFormat = format
            self.converter = converter
        }
    }

    /// Drops the session and converter (after `audio-stop`, or when the job is abandoned); returns
    /// the session's id.
    func close() -> String? {
        lock.withLock {
            defer {
                storedSession = nil
                converter = nil
            }
            return storedSession
        }
    }

    /// `bytes` (whole frames, at most one converter block) as 16 kHz mono s16le.
    func convert(_ bytes: ArraySlice<UInt8>) async throws -> [UInt8] {
        if format == AudioFormatFields(rate: 16000, width: 2, channels: 1) { return Array(bytes) }
        return try await onQueue { [self] in
            guard let converter = lock.withLock({ converter }) else { return [] }
            var samples: [Float] = []
            try converter.convert(bytes) { samples += $0 }
            return PCMSamples.s16le(samples)
        }
    }

    /// What the resampler still holds, as 16 kHz mono s16le.
    func flush() async throws -> [UInt8] {
        try await onQueue { [self] in
            guard let converter = lock.withLock({ converter }) else { return [] }
            var samples: [Float] = []
            try converter.flush { samples += $0 }
            return PCMSamples.s16le(samples)
        }
    }

    private func onQueue<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try work() }) }
        }
    }
}

/// Wyoming's ASR flow: `transcribe` {name, language}, `audio-start`, `audio-chunk`*, `audio-stop` →
/// `transcript-start`, `transcript-chunk` per finalized phrase, `transcript`, `transcript-stop`.
/// Audio comes in any PCM format within ``AudioLimits`` (rate 8000…384000 Hz, width 1/2/4,
/// 1…8 channels); the daemon converts it in bounded blocks with libsoxr. A thin adapter: the
/// session is the ``AnalysisCoordinator``'s, which releases it however it ends.
struct WyomingTranscriber: Sendable {
    let coordinator: AnalysisCoordinator

    var routes: [Route] {
        let wyoming = self
        return [
            .on(Transcribe.self, network: true) { request, _, context in
                let state = try context.connection
                await wyoming.end(state.wyoming, context: context)
                state.wyoming = WyomingTranscription(name: request.name, language: request.language, phrases: request.biasPhrases)
                return []
            },
            .on(AudioStart.self, network: true) { start, _, context in
                let job = try await wyoming.restart(context)
                try await wyoming.begin(job, format: start.format, context: context)
                return [try Frame(TranscriptStart(language: job.language))]
            },
            .on(AudioChunk.self, network: true) { chunk, call, context in
                let state = try context.connection
                let job = state.wyoming ?? WyomingTranscription(name: nil, language: nil)
                state.wyoming = job
                if job.session == nil { try await wyoming.begin(job, format: chunk.format, context: context) }
                guard chunk.format == job.format, let session = job.session else {
                    let expected = job.format.map { "\($0.rate) Hz/\($0.width)/\($0.channels)" } ?? "none"
                    throw WireError(.unsupportedAudioFormat, "audio-chunk format \(chunk.rate) Hz/\(chunk.width)/\(chunk.channels) differs from audio-start's (\(expected))")
                }
                try await wyoming.feed(call.frame.payload, format: chunk.format, job: job, session: session, context: context)
                return []
            },
            .on(AudioStop.self, network: true) { _, _, context in
                let state = try context.connection
                guard let job = state.wyoming, let session = job.session else {
                    let language = state.wyoming?.language
                    state.wyoming = nil
                    return [try Frame(Transcript(text: "", language: language))]
                }
                state.wyoming = nil
                let tail = try await job.flush()
                _ = job.close()
                // A session that failed has already ended (and been released): its transcript is
                // what it produced before.
                if !tail.isEmpty { _ = await wyoming.coordinator.feed(tail, format: .speech16k, start: nil, session: session, of: context.connectionID) }
                _ = try? await wyoming.coordinator.control(.finish(.finalizeThroughEndOfInput, time: nil), session: session, of: context.connectionID)
                guard job.collected.claim() else { return [] } // shutdown finished it and sent the transcript
                return [try Frame(job.collected.transcript), try Frame(TranscriptStop())]
            },
        ]
    }

    /// The job for a new `audio-start`: the connection's, after ending any stream it had open
    /// (a second `audio-start` without `audio-stop` restarts the transcription).
    private func restart(_ context: RequestContext) async throws -> WyomingTranscription {
        let state = try context.connection
        guard let job = state.wyoming else {
            let job = WyomingTranscription(name: nil, language: nil)
            state.wyoming = job
            return job
        }
        guard job.session != nil else { return job }
        await end(job, context: context)
        let fresh = WyomingTranscription(name: job.name, language: job.language)
        state.wyoming = fresh
        return fresh
    }

    /// Cancels `job`'s session (if any): the client started over, so it gets no transcript.
    private func end(_ job: WyomingTranscription?, context: RequestContext) async {
        guard let job, let session = job.close() else { return }
        _ = job.collected.claim()
        await coordinator.cancel(session, of: context.connectionID)
    }

    /// Opens the session for a transcription (``AnalysisCoordinator/openTranscription(_:for:events:)``
    /// picks the model). The format is checked before anything is loaded or allocated.
    private func begin(_ job: WyomingTranscription, format: AudioFormatFields, context: RequestContext) async throws {
        let converter = try PCMConverter(rate: format.rate, width: format.width, channels: format.channels)
        let collected = job.collected
        let channel = try context.connection.channel
        let request = TranscriptionRequest(name: job.name, language: job.language,
                                           context: AnalysisContextData(contextualStrings: job.phrases.isEmpty ? [:] : ["general": job.phrases]))
        let session = try await coordinator.openTranscription(request, for: context.client) { _, event in
            switch event {
            case .result(let result) where result.isFinal && !result.text.isEmpty:
                collected.append(result)
                if let frame = try? Frame(TranscriptChunk(text: result.text + " ")) { channel.post(frame) }
            case .finished(_, shutdown: true) where collected.claim():
                // The daemon is stopping: the client gets what was said so far before the connection closes.
                for event in [try? Frame(collected.transcript), try? Frame(TranscriptStop())] {
                    if let event { channel.post(event) }
                }
            default:
                break
            }
        }
        job.started(session, format: format, converter: converter)
    }

    /// Converts and feeds `payload` a block at a time, so memory stays bounded by the block (not by
    /// the chunk or the conversion ratio) and the session's back-pressure paces each block.
    private func feed(_ payload: [UInt8], format: AudioFormatFields, job: WyomingTranscription, session: String, context: RequestContext) async throws {
        let frameBytes = format.width * format.channels
        guard payload.count % frameBytes == 0 else {
            let channels = format.channels == 1 ? "1 channel" : "\(format.channels) channels"
            throw WireError(.unsupportedAudioFormat, "audio-chunk payload of \(payload.count) bytes is not a whole number of \(frameBytes)-byte frames (\(format.width)-byte samples × \(channels))")
        }
        let block = PCMConverter.blockFrames * frameBytes
        var offset = 0
        while offset < payload.count {
            let end = min(offset + block, payload.count)
            let pcm = try await job.convert(payload[offset..<end])
            // A session that failed has ended: the rest of the stream has nowhere to go.
            if !pcm.isEmpty, await !coordinator.feed(pcm, format: .speech16k, start: nil, session: session, of: context.connectionID) { return }
            offset = end
        }
    }
}
