import Dispatch
import EarshotAssets
import EarshotAudio
import EarshotSpeech
import EarshotSystem
import EarshotWire
import Foundation

/// The text and languages of a Wyoming transcription, filled by the session's event handler.
/// (Separate from ``WyomingTranscription`` because the handler lives in the session: if it held
/// the job, which holds the session, neither would ever be freed.)
final class CollectedTranscript: @unchecked Sendable {
    // @unchecked: every stored var is only touched while holding `lock`.
    private let lock = NSLock()
    private var texts: [String] = []
    /// Seconds of speech per language the engine reported.
    private var languages: [String: Double] = [:]

    func append(_ result: AnalyzerResult) {
        lock.withLock {
            texts.append(result.text)
            if let language = result.language { languages[language, default: 0] += (result.range.end - result.range.start).seconds }
        }
    }

    var text: String { lock.withLock { texts.joined(separator: " ") } }
    /// The language most of the speech was identified as.
    var mostLanguage: String? {
        lock.withLock { languages.max { $0.value == $1.value ? $0.key > $1.key : $0.value < $1.value }?.key }
    }
}

/// A Wyoming ASR transcription in progress on a connection: its session and the converter that
/// turns the client's PCM into the analyzer's 16 kHz mono s16le on the job's own queue.
final class WyomingTranscription: @unchecked Sendable {
    // @unchecked: the mutable state is only touched while holding `lock`; the converter is used
    // only on `queue`.
    let name: String?
    let language: String?
    let collected = CollectedTranscript()
    /// Conversion (samples, downmix, libsoxr) runs here, never on the cooperative pool.
    private let queue = DispatchQueue(label: "earshot.wyoming.convert")
    private let lock = NSLock()
    private var storedSession: AnalysisSession?
    private var storedFormat: AudioFormatFields?
    private var converter: PCMConverter?

    init(name: String?, language: String?) {
        self.name = name
        self.language = language
        LiveObjects.created("WyomingTranscription")
    }

    deinit { LiveObjects.destroyed("WyomingTranscription") }

    var session: AnalysisSession? { lock.withLock { storedSession } }
    var format: AudioFormatFields? { lock.withLock { storedFormat } }

    /// The language asked for, else the one most of the speech was identified as.
    var transcriptLanguage: String? { language ?? collected.mostLanguage }

    func started(_ session: AnalysisSession, format: AudioFormatFields, converter: PCMConverter) {
        lock.withLock {
            storedSession = session
            storedFormat = format
            self.converter = converter
        }
    }

    /// Drops the session and converter (after `audio-stop`, or when the job is abandoned), so
    /// they are freed as soon as the session's own work ends.
    func close() -> AnalysisSession? {
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
/// 1…8 channels); the daemon converts it in bounded blocks with libsoxr.
struct WyomingTranscriber {
    let harness: SpeechHarness

    func handle(_ frame: Frame, context: RequestContext) async throws -> [Frame] {
        let state = context.state
        switch frame.type {
        case Transcribe.eventType:
            let request = try frame.decode(Transcribe.self)
            await end(state.wyoming, state: state)
            state.wyoming = WyomingTranscription(name: request.name, language: request.language)
            return []
        case AudioStart.eventType:
            let start = try frame.decode(AudioStart.self)
            let job = try await restart(state: state)
            try await begin(job, format: start.format, context: context)
            return [try Frame(TranscriptStart(language: job.language))]
        case AudioChunk.eventType:
            let chunk = try frame.decode(AudioChunk.self)
            let job = state.wyoming ?? WyomingTranscription(name: nil, language: nil)
            state.wyoming = job
            if job.session == nil { try await begin(job, format: chunk.format, context: context) }
            guard chunk.format == job.format, let session = job.session else {
                let expected = job.format.map { "\($0.rate) Hz/\($0.width)/\($0.channels)" } ?? "none"
                throw WireError(.unsupportedAudioFormat, "audio-chunk format \(chunk.rate) Hz/\(chunk.width)/\(chunk.channels) differs from audio-start's (\(expected))")
            }
            try await feed(frame.payload, format: chunk.format, job: job, session: session)
            return []
        case AudioStop.eventType:
            guard let job = state.wyoming, let session = job.session else {
                let language = state.wyoming?.language
                state.wyoming = nil
                return [try Frame(Transcript(text: "", language: language))]
            }
            state.wyoming = nil
            let tail = try await job.flush()
            if !tail.isEmpty { await session.accept(tail, format: .speech16k, start: nil) }
            _ = job.close()
            _ = await session.finish(.finalizeThroughEndOfInput, time: nil)
            await harness.cleanUp(session.id, state: state)
            return [try Frame(Transcript(text: job.collected.text, language: job.transcriptLanguage)), try Frame(TranscriptStop())]
        default:
            return []
        }
    }

    /// The job for a new `audio-start`: the connection's, after ending any stream it had open
    /// (a second `audio-start` without `audio-stop` restarts the transcription).
    private func restart(state: ConnectionState) async throws -> WyomingTranscription {
        guard let job = state.wyoming else {
            let job = WyomingTranscription(name: nil, language: nil)
            state.wyoming = job
            return job
        }
        guard job.session != nil else { return job }
        await end(job, state: state)
        let fresh = WyomingTranscription(name: job.name, language: job.language)
        state.wyoming = fresh
        return fresh
    }

    /// Abandons `job`'s session (if any) and releases what it held.
    private func end(_ job: WyomingTranscription?, state: ConnectionState) async {
        guard let session = job?.close() else { return }
        session.abandon()
        await harness.cleanUp(session.id, state: state)
    }

    /// Opens the session for a transcription: the named model, else a transcriber for the
    /// language, else dictation (Apple's advice), whichever is installed. Without a language, a
    /// transcriber that identifies it (`und`) comes first, then English. The format is checked
    /// before anything is loaded or allocated.
    private func begin(_ job: WyomingTranscription, format: AudioFormatFields, context: RequestContext) async throws {
        let converter = try PCMConverter(rate: format.rate, width: format.width, channels: format.channels)
        let language = job.language ?? "en"
        var candidates: [ModuleConfiguration] = [.init(kind: .transcriber, locale: language), .init(kind: .dictation, locale: language)]
        if job.language == nil { candidates.insert(.init(kind: .transcriber, locale: LocaleTag.undetermined), at: 0) }
        if let name = job.name, let asset = try await harness.assets.installedAssets().first(where: { $0.current && $0.entry.id == name }) {
            candidates = [ModuleConfiguration(kind: asset.entry.kind, locale: asset.entry.locales.first ?? language)]
        }
        var lastError: (any Error)?
        let collected = job.collected
        let channel = context.state.channel
        for module in candidates {
            do {
                // Captures neither the job nor the connection state strongly: both (indirectly)
                // hold the session, which holds this handler.
                let session = try await harness.open([module], options: AnalysisOptions(modelRetention: .lingering), context: AnalysisContextData(),
                                                     requester: context) { [weak state = context.state] id, event in
                    switch event {
                    case .result(let result) where result.isFinal && !result.text.isEmpty:
                        collected.append(result)
                        if let frame = try? Frame(TranscriptChunk(text: result.text + " ")) { channel.post(frame) }
                    case .finished:
                        state?.sessionFinished(id)
                    default:
                        break
                    }
                }
                job.started(session, format: format, converter: converter)
                return
            } catch {
                lastError = error
            }
        }
        throw lastError ?? WireError(.notInstalled, "no speech model is installed for \(language)")
    }

    /// Converts and feeds `payload` a block at a time, so memory stays bounded by the block (not by
    /// the chunk or the conversion ratio) and the session's back-pressure paces each block.
    private func feed(_ payload: [UInt8], format: AudioFormatFields, job: WyomingTranscription, session: AnalysisSession) async throws {
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
            if !pcm.isEmpty { await session.accept(pcm, format: .speech16k, start: nil) }
            offset = end
        }
    }
}
