import Earshot
import EarshotAudio
import EarshotClientCommandLine
import EarshotCommandLine
import EarshotSystem
import EarshotWire
import Foundation

/// `earshot transcribe FILE… [--locale L] [--module KIND] [--json|--srt|--vtt]` and `--live`.
enum TranscribeCommand {
    static func run(_ arguments: Arguments, connection: DaemonConnection) async throws -> ExitCode {
        let files = Array(arguments.positional.dropFirst())
        let live = arguments.has("live")
        guard live || !files.isEmpty else { throw WireError(.badRequest, "transcribe needs audio files (or --live to read PCM from stdin)") }
        var candidates = try ModuleArguments.candidates(locale: arguments.value("locale") ?? "en-US", module: arguments.value("module"))
        candidates = candidates.filter { $0.kind != .detector }
        let translate = arguments.has("translate")
        if translate {
            // Only transcribers translate; dictation would silently give untranslated text.
            guard candidates.contains(where: { $0.kind == .transcriber }) else { throw WireError(.badRequest, "--translate needs a transcriber module (dictation cannot translate)") }
            candidates = candidates.filter { $0.kind == .transcriber }.map {
                var module = $0
                module.transcriptionOptions = [ModuleConfiguration.translateOption]
                return module
            }
        }
        guard !candidates.isEmpty else { throw WireError(.badRequest, "transcribe needs a transcriber or dictation module") }

        // Install what is missing, with progress; prefer a transcriber, fall back to dictation.
        _ = try await InstallCommand.run(connection, candidates: candidates, json: true, quiet: true)
        let statuses = try await connection.request(ModuleStatusRequest(modules: candidates), expecting: ModuleStatusReply.self).modules
        guard let index = statuses.firstIndex(of: .installed) else { throw WireError(.notInstalled, "no model could be installed for \(candidates[0].locale ?? "")") }
        let configuration = candidates[index]
        let locale = Locale(identifier: configuration.locale ?? "en-US")

        var exit = ExitCode.success
        for file in live ? ["-"] : files {
            let module = makeModule(configuration.kind, locale: locale, volatile: live, translate: translate)
            let analyzer = SpeechAnalyzer(modules: [module])
            let collector = Task { () -> [TranscriptSegment] in
                var segments: [TranscriptSegment] = []
                let display = LiveLine(textToStdout: !(arguments.has("json") || arguments.has("srt") || arguments.has("vtt")))
                for try await result in results(of: module) {
                    if result.isFinal {
                        let segment = TranscriptSegment(result)
                        segments.append(segment)
                        if live { display.commit(segment.text) }
                    } else if live {
                        display.show(String(result.text.characters))
                    }
                }
                return segments
            }
            do {
                let input: AudioInput = live ? try AudioInput.stdin(rate: try integer(arguments, "rate", default: 16000), channels: try integer(arguments, "channels", default: 1))
                                             : try AudioInput.file(file)
                let last = try await analyzer.analyzeSequence(input)
                if let last { try await analyzer.finalizeAndFinish(through: last) } else { await analyzer.cancelAndFinishNow() }
                let segments = try await collector.value
                // Live text was printed as it was finalized.
                if !live || arguments.has("json") || arguments.has("srt") || arguments.has("vtt") {
                    print(render(segments, file: file, arguments: arguments), terminator: "")
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

    /// `--NAME N` as an integer (`fallback` when absent); anything else is an error, not a default.
    static func integer(_ arguments: Arguments, _ name: String, default fallback: Int) throws -> Int {
        guard let text = arguments.value(name) else { return fallback }
        guard let value = Int(text) else { throw WireError(.badRequest, "--\(name) needs a whole number, not '\(text)'") }
        return value
    }

    static func makeModule(_ kind: AssetKind, locale: Locale, volatile: Bool, translate: Bool) -> any SpeechModule {
        switch kind {
        case .dictation:
            DictationTranscriber(locale: locale, contentHints: [], transcriptionOptions: [.punctuation], reportingOptions: volatile ? [.volatileResults] : [],
                                 attributeOptions: [.audioTimeRange, .transcriptionConfidence])
        default:
            SpeechTranscriber(locale: locale, transcriptionOptions: translate ? [.translateToEnglish] : [], reportingOptions: volatile ? [.volatileResults] : [],
                              attributeOptions: [.audioTimeRange, .transcriptionConfidence])
        }
    }

    static func results(of module: any SpeechModule) -> ModuleResults<TranscriptionResult> {
        if let t = module as? SpeechTranscriber { return t.results }
        return (module as! DictationTranscriber).results
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

/// Volatile text redrawn in place on a terminal (stderr); final text committed to stdout (or to
/// stderr when stdout carries JSON or subtitles).
final class LiveLine: @unchecked Sendable {
    private let tty = isatty(2) == 1
    private let textToStdout: Bool
    init(textToStdout: Bool) { self.textToStdout = textToStdout }
    func show(_ text: String) {
        guard tty else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K\u{1B}[2m\(text.suffix(200))\u{1B}[0m".utf8))
    }
    func commit(_ text: String) {
        if tty { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
        (textToStdout ? FileHandle.standardOutput : FileHandle.standardError).write(Data((text + "\n").utf8))
    }
}

/// 16 kHz mono analyzer input from a file (decoded by libsndfile, resampled by libsoxr) or from raw
/// s16le PCM on stdin, read a chunk at a time on dedicated threads. Formats outside
/// `AudioLimits` (8000…384000 Hz, 1…8 channels) are refused with a message naming the range; the
/// analyzer splits what it sends to the daemon's payload limit.
struct AudioInput: AsyncSequence, Sendable {
    typealias Element = AnalyzerInput
    let source: Source

    final class Source: @unchecked Sendable {
        // Used by one iterator at a time, from one thread at a time.
        let read: () throws -> [Float]?
        init(read: @escaping () throws -> [Float]?) { self.read = read }
    }

    static func file(_ path: String) throws -> AudioInput {
        let decoder = try SpeechFileDecoder(path: path)
        return AudioInput(source: Source { try decoder.next() })
    }

    static func stdin(rate: Int, channels: Int) throws -> AudioInput {
        try AudioLimits.check(rate: rate, channels: channels, what: "--live input")
        let resampler = rate == 16000 ? nil : try Resampler(from: rate, to: 16000, channels: 1)
        var done = false
        return AudioInput(source: Source {
            guard !done else { return nil }
            // Whatever has arrived, up to 0.1 s: the live pace.
            let want = rate * channels * 2 / 10
            var buffer = [UInt8](repeating: 0, count: want)
            let n = buffer.withUnsafeMutableBytes { Glibc.read(0, $0.baseAddress, want) }
            if n <= 0 {
                done = true
                let tail = try resampler?.flush() ?? []
                return tail.isEmpty ? nil : tail
            }
            let samples = try PCM.floats(fromLittleEndian: Array(buffer[0..<(n - n % (2 * channels))]), width: 2)
            let mono = PCM.downmix(samples, channels: channels)
            return try resampler?.process(mono) ?? mono
        })
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        let source: Source
        mutating func next() async throws -> AnalyzerInput? {
            let source = source
            while true {
                guard let samples = try await BlockingWork.run("earshot.audio-input", { try source.read() }) else { return nil }
                if samples.isEmpty { continue }
                return AnalyzerInput(buffer: AudioBuffer(format: AudioFormat(commonFormat: .pcmFormatInt16, sampleRate: 16000, channels: 1), samples: samples))
            }
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(source: source) }
}
