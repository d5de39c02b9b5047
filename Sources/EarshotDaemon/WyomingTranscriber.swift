import EarshotAssets
import EarshotAudio
import EarshotSpeech
import EarshotWire
import Foundation

/// A Wyoming ASR transcription in progress on a connection.
final class WyomingTranscription: @unchecked Sendable {
    var name: String?
    var language: String?
    var session: AnalysisSession?
    var resampler: Resampler?
    var format: AudioFormatFields?
    private let lock = NSLock()
    private var texts: [String] = []
    /// Seconds of speech per language the engine reported.
    private var languages: [String: Double] = [:]

    init(name: String?, language: String?) {
        self.name = name
        self.language = language
    }

    func append(_ result: AnalyzerResult) {
        lock.withLock {
            texts.append(result.text)
            if let language = result.language { languages[language, default: 0] += (result.range.end - result.range.start).seconds }
        }
    }
    var transcript: String { lock.withLock { texts.joined(separator: " ") } }
    /// The language asked for, else the one most of the speech was identified as.
    var transcriptLanguage: String? {
        language ?? lock.withLock { languages.max { $0.value == $1.value ? $0.key > $1.key : $0.value < $1.value }?.key }
    }

    /// Ends the session early (client gone).
    func release(assets: AssetService, speech: SpeechService) async {
        session?.abandon()
    }
}

/// Wyoming's ASR flow: `transcribe` {name, language}, `audio-start`, `audio-chunk`*, `audio-stop` →
/// `transcript-start`, `transcript-chunk` per finalized phrase, `transcript`, `transcript-stop`.
/// Audio comes at any PCM rate, width and channel count; the daemon converts it with libsoxr.
struct WyomingTranscriber {
    let harness: SpeechHarness

    func handle(_ frame: Frame, context: RequestContext) async throws -> [Frame] {
        let state = context.state
        switch frame.type {
        case Transcribe.eventType:
            let request = try frame.decode(Transcribe.self)
            state.wyoming = WyomingTranscription(name: request.name, language: request.language)
            return []
        case AudioStart.eventType:
            let start = try frame.decode(AudioStart.self)
            let job = state.wyoming ?? WyomingTranscription(name: nil, language: nil)
            state.wyoming = job
            try await begin(job, format: start.format, context: context)
            return [try Frame(TranscriptStart(language: job.language))]
        case AudioChunk.eventType:
            let chunk = try frame.decode(AudioChunk.self)
            let job = state.wyoming ?? WyomingTranscription(name: nil, language: nil)
            if job.session == nil {
                state.wyoming = job
                try await begin(job, format: chunk.format, context: context)
            }
            guard chunk.format == job.format else {
                throw WireError(.unsupportedAudioFormat, "audio-chunk format \(chunk.rate) Hz/\(chunk.width)/\(chunk.channels) differs from audio-start's")
            }
            try await feed(PCM.floats(fromLittleEndian: frame.payload, width: chunk.width), job: job)
            return []
        case AudioStop.eventType:
            guard let job = state.wyoming, let session = job.session else {
                return [try Frame(Transcript(text: "", language: state.wyoming?.language))]
            }
            if let resampler = job.resampler {
                await session.accept(PCMSamples.s16le(try resampler.flush()), format: .speech16k, start: nil)
            }
            _ = await session.finish(.finalizeThroughEndOfInput, time: nil)
            await harness.cleanUp(session.id, state: state)
            state.wyoming = nil
            return [try Frame(Transcript(text: job.transcript, language: job.transcriptLanguage)), try Frame(TranscriptStop())]
        default:
            return []
        }
    }

    /// Opens the session for a transcription: the named model, else a transcriber for the
    /// language, else dictation (Apple's advice), whichever is installed. Without a language, a
    /// transcriber that identifies it (`und`) comes first, then English.
    private func begin(_ job: WyomingTranscription, format: AudioFormatFields, context: RequestContext) async throws {
        guard format.rate > 0, [1, 2, 4].contains(format.width), format.channels > 0 else {
            throw WireError(.unsupportedAudioFormat, "unsupported PCM: \(format.rate) Hz, width \(format.width), \(format.channels) channel(s)")
        }
        job.format = format
        job.resampler = format.rate == 16000 ? nil : try Resampler(from: format.rate, to: 16000, channels: 1)
        let language = job.language ?? "en"
        var candidates: [ModuleConfiguration] = [.init(kind: .transcriber, locale: language), .init(kind: .dictation, locale: language)]
        if job.language == nil { candidates.insert(.init(kind: .transcriber, locale: LocaleTag.undetermined), at: 0) }
        if let name = job.name, let asset = try await harness.assets.installedAssets().first(where: { $0.current && $0.entry.id == name }) {
            candidates = [ModuleConfiguration(kind: asset.entry.kind, locale: asset.entry.locales.first ?? language)]
        }
        var lastError: (any Error)?
        let state = context.state
        for module in candidates {
            do {
                job.session = try await harness.open([module], options: AnalysisOptions(modelRetention: .lingering), context: AnalysisContextData(), requester: context) { id, event in
                    switch event {
                    case .result(let result) where result.isFinal && !result.text.isEmpty:
                        job.append(result)
                        if let frame = try? Frame(TranscriptChunk(text: result.text + " ")) { state.channel.post(frame) }
                    case .finished:
                        state.sessionFinished(id)
                    default:
                        break
                    }
                }
                return
            } catch {
                lastError = error
            }
        }
        throw lastError ?? WireError(.notInstalled, "no speech model is installed for \(language)")
    }

    private func feed(_ samples: [Float], job: WyomingTranscription) async throws {
        guard let session = job.session, let format = job.format else { return }
        var mono = PCM.downmix(samples, channels: format.channels)
        if let resampler = job.resampler { mono = try resampler.process(mono) }
        await session.accept(PCMSamples.s16le(mono), format: .speech16k, start: nil)
    }
}
