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

    public let files: Files
    /// Whisper language code given to the model ("en"; English-only exports ignore it). A code a
    /// multilingual model does not list makes sherpa-onnx exit the process: validate it first.
    public let language: String
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

    /// Loads the model. Blocking.
    public init(files: Files, language: String = "en", numThreads: Int = 2, concurrentDecoding: Bool = true) throws(SherpaOnnxError) {
        for path in [files.encoder, files.decoder, files.tokens] where !FileManager.default.isReadableFile(atPath: path) {
            throw .missingFile(path)
        }
        guard numThreads > 0 else { throw .invalidInput("numThreads must be positive, not \(numThreads)") }
        let started = Date()
        let residentBefore = ProcessFacts.residentBytes()
        let made: OpaquePointer? = SherpaOnnxSupport.withCStrings([
            files.encoder, files.decoder, files.tokens, language, "transcribe", "cpu", "greedy_search",
        ]) { strings in
            var config = SherpaOnnxOfflineRecognizerConfig()
            config.feat_config.sample_rate = 16000
            config.feat_config.feature_dim = 80
            config.model_config.whisper.encoder = strings[0]
            config.model_config.whisper.decoder = strings[1]
            config.model_config.tokens = strings[2]
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
        self.numThreads = numThreads
        self.concurrentDecoding = concurrentDecoding
        // Warm up: ONNX Runtime allocates its working memory on the first run.
        _ = Self.decode(made, [Float](repeating: 0, count: 16000), sampleRate: 16000)
        let grown = ProcessFacts.residentBytes() - residentBefore
        memoryBytes = grown > 0 ? grown : files.byteCount
        loadSeconds = Date().timeIntervalSince(started)
    }

    deinit {
        SherpaOnnxDestroyOfflineRecognizer(recognizer)
        // ONNX Runtime's ~100 MiB of working memory was allocated on whichever threads loaded and
        // decoded; glibc keeps the freed pages in those threads' arenas, so without a trim the
        // daemon's resident set ratchets up with every unload/reload (≈ +100 MiB per reload).
        malloc_trim(0)
    }

    /// Transcribes mono samples in [-1, 1] (at most ``maximumDuration`` seconds; sherpa-onnx
    /// resamples other rates to 16 kHz). Blocking.
    public func transcribe(_ samples: [Float], sampleRate: Int) throws(SherpaOnnxError) -> Transcription {
        guard sampleRate > 0, sampleRate <= 1_000_000 else { throw .invalidInput("sample rate \(sampleRate)") }
        let seconds = Double(samples.count) / Double(sampleRate)
        guard seconds <= Self.maximumDuration else { throw .inputTooLong(seconds: seconds, limit: Self.maximumDuration) }
        if samples.isEmpty { return Transcription(text: "") }
        if concurrentDecoding { return Self.decode(recognizer, samples, sampleRate: sampleRate) }
        serial.lock()
        defer { serial.unlock() }
        return Self.decode(recognizer, samples, sampleRate: sampleRate)
    }

    /// One decode on a stream of its own.
    private static func decode(_ recognizer: OpaquePointer, _ samples: [Float], sampleRate: Int) -> Transcription {
        let stream = SherpaOnnxCreateOfflineStream(recognizer)
        defer { SherpaOnnxDestroyOfflineStream(stream) }
        samples.withUnsafeBufferPointer {
            SherpaOnnxAcceptWaveformOffline(stream, Int32(sampleRate), $0.baseAddress, Int32($0.count))
        }
        SherpaOnnxDecodeOfflineStream(recognizer, stream)
        guard let result = SherpaOnnxGetOfflineStreamResult(stream) else { return Transcription(text: "") }
        defer { SherpaOnnxDestroyOfflineRecognizerResult(result) }
        return transcription(from: result.pointee)
    }

    /// Text, and words with times when the export gives token timestamps (Whisper tokens that
    /// start with a space begin a word).
    private static func transcription(from result: SherpaOnnxOfflineRecognizerResult) -> Transcription {
        let text = result.text.map { String(cString: $0) }?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        var confidence: Double?
        if let logProbs = result.ys_log_probs, result.count > 0 {
            let mean = (0..<Int(result.count)).reduce(0.0) { $0 + Double(logProbs[$1]) } / Double(result.count)
            confidence = exp(mean)
        }
        var words: [RecognizedWord] = []
        if let times = result.timestamps, let tokens = result.tokens_arr, result.count > 0 {
            for index in 0..<Int(result.count) {
                guard let token = tokens[index].map({ String(cString: $0) }), !token.isEmpty else { continue }
                let start = Double(times[index])
                if token.first?.isWhitespace == true || words.isEmpty {
                    if !words.isEmpty, words[words.count - 1].end == nil { words[words.count - 1].end = start }
                    words.append(RecognizedWord(text: token.trimmingCharacters(in: .whitespaces), start: start))
                } else {
                    words[words.count - 1].text += token
                }
            }
            words.removeAll { $0.text.isEmpty }
        }
        return Transcription(text: text, words: words, confidence: confidence)
    }
}
