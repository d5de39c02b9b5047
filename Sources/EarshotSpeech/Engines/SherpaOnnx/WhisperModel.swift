import CSherpaOnnx
import EarshotSystem
import Foundation

/// An offline Whisper recognizer (sherpa-onnx C API) loaded once and shared by every session that
/// uses the same files and settings.
///
/// Calls block (loading tiny.en takes ~0.2–0.7 s, a decode 3–4 % of the audio's duration): run
/// them on dedicated threads (`BlockingWork`), never on the cooperative pool.
///
/// Thread safety: `transcribe` may be called from several threads at once. Each call has its own
/// sherpa-onnx stream; sherpa-onnx's maintainer states that recognizers are thread-safe and streams
/// are not (k2-fsa/sherpa-onnx#1450), and its Whisper recognizer decodes in a `const` method whose
/// model work is ONNX Runtime `Session::Run` (safe to call concurrently). The one shared write is
/// the recognizer copying its own, never-changed Whisper settings into its decoder at the start of
/// every decode (`offline-recognizer-whisper-impl.h`): identical bytes, harmless in practice but a
/// data race in C++ terms. Pass `concurrentDecoding: false` to serialize decodes.
public final class WhisperModel: @unchecked Sendable {
    // @unchecked: `recognizer` is created in init and destroyed in deinit only; in between it is
    // used through sherpa-onnx calls that are safe concurrently (see above), or under `serial`.

    /// The three files of a sherpa-onnx Whisper export.
    public struct Files: Sendable, Hashable {
        public var encoder: String
        public var decoder: String
        public var tokens: String

        public init(encoder: String, decoder: String, tokens: String) {
            self.encoder = encoder
            self.decoder = decoder
            self.tokens = tokens
        }

        /// Finds `*encoder*.onnx`, `*decoder*.onnx` and `*tokens.txt` in `directory`, preferring
        /// int8 exports (e.g. `tiny-encoder.int8.onnx`, `tiny-decoder.int8.onnx`, `tiny-tokens.txt`).
        public init(directory: String) throws(SherpaOnnxError) {
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
            func pick(_ part: String) throws(SherpaOnnxError) -> String {
                let found = names.filter { $0.contains(part) && $0.hasSuffix(".onnx") }
                guard let name = found.first(where: { $0.contains(".int8.") }) ?? found.first else {
                    throw .missingFile("\(directory)/*\(part)*.onnx")
                }
                return directory + "/" + name
            }
            guard let tokens = names.first(where: { $0.hasSuffix("tokens.txt") }) else {
                throw .missingFile("\(directory)/*tokens.txt")
            }
            self.init(encoder: try pick("encoder"), decoder: try pick("decoder"), tokens: directory + "/" + tokens)
        }

        /// Total size of the files in bytes.
        public var byteCount: Int {
            [encoder, decoder, tokens].reduce(0) { total, path in
                total + (((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? 0)
            }
        }
    }

    /// The longest input one call decodes: sherpa-onnx keeps 2950 feature frames (29.5 s) of a
    /// Whisper stream and silently drops the rest, so longer input is rejected instead.
    public static let maximumDuration: Double = 29.5

    /// What a Whisper model is asked to do with speech.
    public enum Task: String, Sendable, Hashable {
        /// Text in the language spoken.
        case transcribe
        /// Text in English, whatever the language spoken (multilingual models only).
        case translate
    }

    public let files: Files
    /// Whisper language code given to the model (``WhisperLanguage/whisperCodes``), or nil to have a
    /// multilingual model identify the language of each decode. English-only exports ignore it.
    public let language: String?
    public let task: Task
    /// ONNX Runtime threads per decode.
    public let numThreads: Int
    /// Whether decodes may run concurrently (see the type's documentation).
    public let concurrentDecoding: Bool
    /// Approximate memory the loaded model holds: growth of this process's resident set while it
    /// loaded and ran a 1 s warm-up decode (falls back to the files' size if that is not
    /// measurable, e.g. when other threads freed memory meanwhile). Decoding near-30 s segments
    /// grows ONNX Runtime's working memory further (tiny.en: about 80 MiB more).
    public let memoryBytes: Int
    /// Seconds the load (including the warm-up decode) took.
    public let loadSeconds: Double

    private let recognizer: OpaquePointer
    private let serial = NSLock()

    /// Loads the model. Blocking. `language` must be one of ``WhisperLanguage/whisperCodes`` (a code
    /// a multilingual model does not know would end the process inside sherpa-onnx), or nil.
    public init(files: Files, language: String? = "en", task: Task = .transcribe, numThreads: Int = 2, concurrentDecoding: Bool = true) throws(SherpaOnnxError) {
        for path in [files.encoder, files.decoder, files.tokens] where !FileManager.default.isReadableFile(atPath: path) {
            throw .missingFile(path)
        }
        guard numThreads > 0 else { throw .invalidInput("numThreads must be positive, not \(numThreads)") }
        if let language, !WhisperLanguage.whisperCodes.contains(language) {
            throw .invalidInput("Whisper has no language \"\(language)\"")
        }
        let started = Date()
        let residentBefore = ProcessFacts.residentBytes()
        let made: OpaquePointer? = SherpaOnnxSupport.withCStrings([
            files.encoder, files.decoder, files.tokens, language ?? "", task.rawValue, "cpu", "greedy_search",
        ]) { strings in
            var config = SherpaOnnxOfflineRecognizerConfig()
            config.feat_config.sample_rate = 16000
            config.feat_config.feature_dim = 80
            config.model_config.whisper.encoder = strings[0]
            config.model_config.whisper.decoder = strings[1]
            config.model_config.tokens = strings[2]
            // Empty: multilingual models identify the language of each decode.
            config.model_config.whisper.language = strings[3]
            config.model_config.whisper.task = strings[4]
            // Token times come from cross-attention where the export provides it; ignored otherwise.
            config.model_config.whisper.enable_token_timestamps = 1
            config.model_config.provider = strings[5]
            config.model_config.num_threads = Int32(numThreads)
            config.decoding_method = strings[6]
            return SherpaOnnxCreateOfflineRecognizer(&config)
        }
        guard let made else { throw .loadFailed("the Whisper model in \(files.encoder)") }
        recognizer = made
        self.files = files
        self.language = language
        self.task = task
        self.numThreads = numThreads
        self.concurrentDecoding = concurrentDecoding
        // Warm up: ONNX Runtime allocates its working memory on the first run.
        _ = Self.decode(made, [Float](repeating: 0, count: 16000), sampleRate: 16000, language: language)
        let grown = ProcessFacts.residentBytes() - residentBefore
        memoryBytes = grown > 0 ? grown : files.byteCount
        loadSeconds = Date().timeIntervalSince(started)
    }

    deinit {
        SherpaOnnxDestroyOfflineRecognizer(recognizer)
        // ONNX Runtime's ~100 MiB of working memory: without a trim the daemon's resident set
        // ratchets up with every unload/reload (≈ +100 MiB per reload).
        MemoryReclaim.afterRelease()
    }

    /// Transcribes mono samples in [-1, 1] (at most ``maximumDuration`` seconds; sherpa-onnx
    /// resamples other rates to 16 kHz). Blocking.
    public func transcribe(_ samples: [Float], sampleRate: Int) throws(SherpaOnnxError) -> Transcription {
        guard sampleRate > 0, sampleRate <= 1_000_000 else { throw .invalidInput("sample rate \(sampleRate)") }
        let seconds = Double(samples.count) / Double(sampleRate)
        guard seconds <= Self.maximumDuration else { throw .inputTooLong(seconds: seconds, limit: Self.maximumDuration) }
        if samples.isEmpty { return Transcription(text: "", language: language.flatMap(WhisperLanguage.bcp47(forWhisperCode:))) }
        if concurrentDecoding { return Self.decode(recognizer, samples, sampleRate: sampleRate, language: language) }
        serial.lock()
        defer { serial.unlock() }
        return Self.decode(recognizer, samples, sampleRate: sampleRate, language: language)
    }

    /// One decode on a stream of its own.
    private static func decode(_ recognizer: OpaquePointer, _ samples: [Float], sampleRate: Int, language: String?) -> Transcription {
        let stream = SherpaOnnxCreateOfflineStream(recognizer)
        defer { SherpaOnnxDestroyOfflineStream(stream) }
        samples.withUnsafeBufferPointer {
            SherpaOnnxAcceptWaveformOffline(stream, Int32(sampleRate), $0.baseAddress, Int32($0.count))
        }
        SherpaOnnxDecodeOfflineStream(recognizer, stream)
        let duration = Double(samples.count) / Double(sampleRate)
        guard let result = SherpaOnnxGetOfflineStreamResult(stream) else { return Transcription(text: "") }
        defer { SherpaOnnxDestroyOfflineRecognizerResult(result) }
        var transcription = transcription(from: result.pointee, duration: duration)
        // The configured language, else the one the model identified.
        let identified = result.pointee.lang.map { String(cString: $0) }.flatMap(WhisperLanguage.bcp47(forWhisperCode:))
        transcription.language = language.flatMap(WhisperLanguage.bcp47(forWhisperCode:)) ?? identified
        return transcription
    }

    /// Text, and words with times and confidences when the export gives token timestamps (Whisper
    /// tokens that start with a space begin a word). A word ends where its last token ends (token
    /// durations), else where the next word starts, else at the end of the audio.
    static func transcription(from result: SherpaOnnxOfflineRecognizerResult, duration: Double) -> Transcription {
        let text = result.text.map { String(cString: $0) }?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        let count = Int(result.count)
        var tokens: [WhisperToken] = []
        if let times = result.timestamps, let pieces = result.tokens_arr, count > 0 {
            for index in 0..<count {
                guard let piece = pieces[index].map({ String(cString: $0) }) else { continue }
                tokens.append(WhisperToken(text: piece, start: Double(times[index]),
                                           duration: result.durations.map { Double($0[index]) },
                                           logProbability: result.ys_log_probs.map { Double($0[index]) }))
            }
        }
        var confidence: Double?
        if let logProbs = result.ys_log_probs, count > 0 {
            confidence = exp((0..<count).reduce(0.0) { $0 + Double(logProbs[$1]) } / Double(count))
        }
        return Transcription(text: text, words: WhisperToken.words(tokens, duration: duration), confidence: confidence)
    }
}

/// One decoded Whisper token with its time, as sherpa-onnx reports it.
struct WhisperToken: Sendable, Hashable {
    var text: String
    /// Seconds from the start of the decoded audio.
    var start: Double
    var duration: Double?
    var logProbability: Double?

    /// Groups tokens into words: a token that starts with white space begins a word; the others
    /// (word pieces, punctuation) continue the current one. Times are clamped to
    /// `[0, duration]` and made monotonic; a word's confidence is the geometric mean of its
    /// tokens' probabilities.
    static func words(_ tokens: [WhisperToken], duration: Double) -> [RecognizedWord] {
        var groups: [[WhisperToken]] = []
        for token in tokens where !token.text.isEmpty {
            if token.text.first?.isWhitespace == true || groups.isEmpty { groups.append([token]) } else { groups[groups.count - 1].append(token) }
        }
        var words: [RecognizedWord] = []
        var floor = 0.0
        for (index, group) in groups.enumerated() {
            let text = group.map(\.text).joined().trimmingCharacters(in: .whitespaces)
            guard !text.isEmpty, let first = group.first, let last = group.last else { continue }
            let start = min(max(first.start, floor), duration)
            let nextStart = index + 1 < groups.count ? groups[index + 1].first?.start : nil
            var end = last.duration.map { last.start + $0 } ?? nextStart ?? duration
            end = min(max(end, start), duration)
            floor = start
            let logProbabilities = group.compactMap(\.logProbability)
            let confidence = logProbabilities.isEmpty ? nil : exp(logProbabilities.reduce(0, +) / Double(logProbabilities.count))
            words.append(RecognizedWord(text: text, start: start, end: end, confidence: confidence))
        }
        return words
    }
}
