import Earshot
import EarshotCommandLine
import EarshotWire
import Foundation

/// `earshot transcribe FILE… [--locale L] [--module KIND] [--keep-alive D] [--prompt TEXT] [--context PHRASE]… [--beam N]
/// [--temperature T] [--json|--srt|--vtt]`, `--live` and `--mic`: checked in full when made, before
/// any daemon is contacted.
struct TranscribeCommand {
    let arguments: Arguments
    let files: [String]
    let mic: Bool
    let live: Bool
    /// Transcriber first, then dictation (a detector never transcribes).
    let candidates: [ModuleConfiguration]
    let translate: Bool
    let languageModel: SFSpeechLanguageModel.Configuration?
    let keepAlive: Duration?
    let options: SpeechAnalyzer.Options
    let context: [String]
    /// `--rate` and `--channels` of `--live` input.
    let rate: Int
    let channels: Int

    init(_ arguments: Arguments) throws(UsageError) {
        self.arguments = arguments
        files = Array(arguments.positional.dropFirst())
        mic = arguments.has("mic")
        live = arguments.has("live") || mic
        guard live || !files.isEmpty else { throw UsageError("transcribe needs audio files (or --live to read PCM from stdin, or --mic)") }
        var candidates: [ModuleConfiguration]
        do {
            candidates = try ModuleArguments.candidates(locale: arguments.value("locale") ?? "en-US", module: arguments.value("module"))
        } catch {
            throw UsageError(error)
        }
        candidates = candidates.filter { $0.kind != .detector }
        translate = arguments.has("translate")
        if translate {
            // Only transcribers translate; dictation would silently give untranslated text.
            guard candidates.contains(where: { $0.kind == .transcriber }) else { throw UsageError("--translate needs a transcriber module (dictation cannot translate)") }
            candidates = candidates.filter { $0.kind == .transcriber }.map {
                var module = $0
                module.transcriptionOptions = [ModuleConfiguration.translateOption]
                return module
            }
        }
        guard !candidates.isEmpty else { throw UsageError("transcribe needs a transcriber or dictation module") }
        self.candidates = candidates
        // Dictation interpolates a custom language model; Whisper takes its phrases as contextual strings.
        languageModel = arguments.value("lm").map { SFSpeechLanguageModel.Configuration(languageModel: URL(fileURLWithPath: $0)) }
        // Warm by default (Ollama's keep_alive): the model lingers for the daemon's LingerSeconds,
        // or --keep-alive, so the next call does not load it again.
        do {
            keepAlive = try arguments.duration("keep-alive")
        } catch {
            throw UsageError(error)
        }
        // Files are whole recordings: Whisper decodes consecutive utterances together.
        options = SpeechAnalyzer.Options(priority: .userInitiated, modelRetention: .lingering, keepAlive: keepAlive, input: live ? .live : .recording,
                                         decoding: try Self.decoding(arguments))
        context = arguments.values("context")
        rate = try Self.integer(arguments, "rate", default: 16000)
        channels = try Self.integer(arguments, "channels", default: 1)
    }

    func run(connection: DaemonConnection) async throws -> ExitCode {
        // One status query when the preferred model is installed (the analyzer shares this
        // connection); otherwise it installs the first supported candidate — a transcriber over
        // dictation — with progress.
        var statuses = try await connection.request(ModuleStatusRequest(modules: candidates), expecting: ModuleStatusReply.self).modules
        if statuses.first(where: { $0 != .unsupported }) != .installed {
            _ = try await InstallCommand.run(connection, candidates: candidates, json: true, quiet: true)
            statuses = try await connection.request(ModuleStatusRequest(modules: candidates), expecting: ModuleStatusReply.self).modules
        }
        guard let index = statuses.firstIndex(of: .installed) else { throw WireError(.notInstalled, "no model could be installed for \(candidates[0].locale ?? "")") }
        let configuration = candidates[index]
        let locale = Locale(identifier: configuration.locale ?? "en-US")

        // The daemon's engines analyse 16 kHz mono; files and --live input are converted to it.
        let format = SpeechAnalyzer.analyzerFormat
        var exit = ExitCode.success
        var keepAliveNoted = false
        for file in live ? [mic ? "microphone" : "-"] : files {
            let module = Self.makeModule(configuration.kind, locale: locale, volatile: live, translate: translate, languageModel: languageModel)
            let analyzer = SpeechAnalyzer(modules: [module], options: options)
            if !context.isEmpty {
                let analysisContext = AnalysisContext()
                analysisContext.contextualStrings[.general] = context
                try await analyzer.setContext(analysisContext)
            }
            // Final text on stdout (stderr when stdout carries JSON or subtitles); volatile text
            // redrawn in place on the terminal.
            let display = live ? LiveTranscriptRenderer.onStandardError(finalsToStderr: arguments.has("json") || arguments.has("srt") || arguments.has("vtt")) : nil
            let collector = Task { try await Self.segments(of: module, live: display) }
            do {
                let last = if mic {
                    try await analyzer.analyzeSequence(try Self.microphone(arguments))
                } else if live {
                    try await analyzer.analyzeSequence(RawPCMInputSequenceProvider(fileDescriptor: 0, sampleRate: rate, channels: channels, analyzerFormat: format).analyzerInputs)
                } else {
                    // The provider opens and decodes the file on its own threads.
                    try await analyzer.analyzeSequence(AssetInputSequenceProvider.provider(from: AVURLAsset(url: URL(fileURLWithPath: file)), analyzerFormat: format).analyzerInputs)
                }
                if keepAlive != nil, !keepAliveNoted {
                    keepAliveNoted = true
                    let granted = await analyzer.grantedKeepAlive
                    if granted == nil {
                        Output.note("earshot: --keep-alive has no effect: the \(configuration.kind.rawValue) model is not shared between calls (it loads per session)")
                    } else if let granted, granted.clamped {
                        Output.note("earshot: --keep-alive \(arguments.value("keep-alive") ?? "") is more than the daemon allows (MaxKeepAliveSec): clamped to \(granted.duration)")
                    }
                }
                if let last { try await analyzer.finalizeAndFinish(through: last) } else { await analyzer.cancelAndFinishNow() }
                let segments = try await collector.value
                if let dropped = segments.compactMap({ $0.decoding?.promptTokensDropped }).max() {
                    Output.note("earshot: --prompt: its first \(dropped) tokens were dropped (Whisper takes the last \(DecodingOptions.maxPromptTokens))")
                }
                // Speech the model gave no text for is said, never passed off as silence.
                for stretch in TranscriptFormatter.speechWithoutText(segments) {
                    Output.note("earshot: \(file): no text for speech at " + String(format: "%.1f–%.1f s", stretch.start, stretch.end))
                }
                // Live text was printed as it was finalized.
                if !live || arguments.has("json") || arguments.has("srt") || arguments.has("vtt") {
                    print(Self.render(segments, file: file, arguments: arguments), terminator: "")
                }
            } catch {
                collector.cancel()
                await analyzer.cancelAndFinishNow()
                Output.error("earshot", "\(file): \(error)")
                exit = .failure
            }
        }
        return exit
    }

    /// The `--device` source (default: the sound server's), recorded until SIGINT (Ctrl-C), which
    /// stops capture so the words said so far are finalized and printed.
    static func microphone(_ arguments: Arguments) throws -> AnalyzerInputSequence {
        let device = try arguments.value("device").map { name in
            try AVCaptureDevice(uniqueID: name).orThrow(UsageError("--device needs a source name (earshot devices), not '\(name)'"))
        } ?? AVCaptureDevice.default(.microphone, for: .audio, position: .unspecified)!
        // The model is installed (checked above), so the format is the analyzer's: no second query.
        let session = AVCaptureSession()
        session.startRunning()
        let provider = CaptureInputSequenceProvider(device: device, session: session, analyzerFormat: SpeechAnalyzer.analyzerFormat)
        signal(SIGINT, SIG_IGN)
        let interrupt = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        interrupt.setEventHandler { provider.captureSession.stopRunning() }
        interrupt.resume()
        stopOnInterrupt = interrupt
        return provider.analyzerInputs
    }

    /// Keeps the SIGINT source alive while capturing.
    nonisolated(unsafe) static var stopOnInterrupt: (any DispatchSourceSignal)?

    /// `--prompt TEXT`, `--beam N` and `--temperature T` (nil when none is given); a value out of
    /// range is an error here, before any audio is sent.
    static func decoding(_ arguments: Arguments) throws(UsageError) -> SpeechAnalyzer.Options.Decoding? {
        let beam = try arguments.value("beam").map { text throws(UsageError) in
            guard let value = Int(text), (1...DecodingOptions.maxBeamSize).contains(value) else {
                throw UsageError("--beam needs a whole number from 1 to \(DecodingOptions.maxBeamSize), not '\(text)'")
            }
            return value
        }
        let temperature = try arguments.value("temperature").map { text throws(UsageError) in
            guard let value = Double(text), value.isFinite, (0...1).contains(value) else {
                throw UsageError("--temperature needs a number from 0 to 1, not '\(text)'")
            }
            return value
        }
        let decoding = SpeechAnalyzer.Options.Decoding(prompt: arguments.value("prompt"), beamSize: beam, temperature: temperature)
        if let problem = DecodingOptions(prompt: decoding.prompt, beamSize: beam, temperature: temperature).problem {
            throw UsageError("--prompt: \(problem)")
        }
        return decoding == SpeechAnalyzer.Options.Decoding() ? nil : decoding
    }

    /// `--NAME N` as an integer (`fallback` when absent); anything else is an error, not a default.
    static func integer(_ arguments: Arguments, _ name: String, default fallback: Int) throws(UsageError) -> Int {
        guard let text = arguments.value(name) else { return fallback }
        guard let value = Int(text) else { throw UsageError("--\(name) needs a whole number, not '\(text)'") }
        return value
    }

    static func makeModule(_ kind: AssetKind, locale: Locale, volatile: Bool, translate: Bool, languageModel: SFSpeechLanguageModel.Configuration?) -> any SpeechModule {
        switch kind {
        case .dictation:
            // No `.punctuation`: PocketSphinx has none, and the daemon would report it unhonoured.
            DictationTranscriber(locale: locale, contentHints: languageModel.map { [.customizedLanguage(modelConfiguration: $0)] } ?? [], transcriptionOptions: [],
                                 reportingOptions: volatile ? [.volatileResults] : [],
                                 attributeOptions: [.audioTimeRange, .transcriptionConfidence])
        default:
            SpeechTranscriber(locale: locale, transcriptionOptions: translate ? [.translateToEnglish] : [], reportingOptions: volatile ? [.volatileResults] : [],
                              attributeOptions: [.audioTimeRange, .transcriptionConfidence], customLanguageModel: languageModel)
        }
    }

    /// The module's final results as segments, and its volatile texts to `volatile`.
    static func segments(of module: any SpeechModule, live: LiveTranscriptRenderer?) async throws -> [TranscriptSegment] {
        if let transcriber = module as? SpeechTranscriber { return try await segments(transcriber.results, live: live) }
        return try await segments((module as! DictationTranscriber).results, live: live)
    }

    static func segments<M>(_ results: ModuleResults<TranscriptionResult<M>>, live: LiveTranscriptRenderer?) async throws -> [TranscriptSegment] {
        var segments: [TranscriptSegment] = []
        defer { live?.finish() }
        for try await result in results {
            if result.isFinal {
                let segment = TranscriptSegment(result)
                segments.append(segment)
                live?.commit(segment.text)
            } else {
                live?.show(String(result.text.characters))
            }
        }
        return segments
    }

    static func render(_ segments: [TranscriptSegment], file: String, arguments: Arguments) -> String {
        if arguments.has("json") {
            struct Document: Encodable { var file: String; var text: String; var language: String?; var segments: [TranscriptSegment] }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            let document = Document(file: file, text: TranscriptFormatter.text(segments), language: TranscriptFormatter.language(segments), segments: segments)
            let data = (try? encoder.encode(document)) ?? Data()
            return String(decoding: data, as: UTF8.self) + "\n"
        }
        if arguments.has("srt") { return TranscriptFormatter.srt(segments) }
        if arguments.has("vtt") { return TranscriptFormatter.vtt(segments) }
        return TranscriptFormatter.text(segments) + "\n"
    }
}
