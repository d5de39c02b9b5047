import EarshotEngineLink
import EarshotSystem
import EarshotWire
import Foundation

/// A Whisper model loaded in the ``EngineProcess`` (Earshot's decoder, EarshotWhisper) once and
/// shared by every session that uses the same files and thread count, whatever their language,
/// task or search: those travel with each decode (``DecodeSettings``).
///
/// Calls block (loading tiny.en takes ~0.2–0.7 s, a decode a few % of the audio's duration): run
/// them on dedicated threads (`BlockingWork`), never on the cooperative pool.
///
/// Thread safety: `transcribe` may be called from several threads at once: each decode runs on a
/// thread of its own in the engine process, over ONNX Runtime sessions that are safe for concurrent
/// runs, with no state shared between decodes. Pass `concurrentDecoding: false` to serialize them.
public final class WhisperModel: @unchecked Sendable {
    // @unchecked: every stored property is a constant; `serial` serializes decodes when asked to.

    /// The three files of a converted Whisper model (Scripts/models/whisper-ct2-to-onnx.py;
    /// the layout sherpa-onnx's exports use, the catalog's engine `sherpa-onnx-whisper`).
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

    /// The longest input one call decodes: the encoder takes 3000 feature frames (30 s), of which
    /// the decoder keeps 50 for silence after the speech; longer input is rejected, never cut.
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

    private let recognizer: EngineObject
    private let serial = NSLock()

    /// Loads the model in `engine`'s process (starting it if needed). Blocking. `language` must be
    /// one of ``WhisperLanguage/whisperCodes`` (a code a multilingual model does not know would end
    /// the engine process inside sherpa-onnx), or nil.
    public init(files: Files, language: String? = "en", task: Task = .transcribe, numThreads: Int = 2, concurrentDecoding: Bool = true,
                engine: EngineProcess = .shared) throws(SherpaOnnxError) {
        for path in [files.encoder, files.decoder, files.tokens] where !FileManager.default.isReadableFile(atPath: path) {
            throw .missingFile(path)
        }
        guard numThreads > 0 else { throw .invalidInput("numThreads must be positive, not \(numThreads)") }
        if let language, !WhisperLanguage.whisperCodes.contains(language) {
            throw .invalidInput("Whisper has no language \"\(language)\"")
        }
        let started = Date()
        let (object, loaded) = try engine.load { name throws(SherpaOnnxError) in
            // The warm-up decode (ONNX Runtime allocates its working memory on the first run)
            // happens in the engine process, within the load.
            try EngineObject.frame(EngineWhisperLoad(
                id: "", object: name, encoder: files.encoder, decoder: files.decoder, tokens: files.tokens,
                language: language ?? "", task: task.rawValue, threads: numThreads))
        }
        recognizer = object
        self.files = files
        self.language = language
        self.task = task
        self.numThreads = numThreads
        self.concurrentDecoding = concurrentDecoding
        memoryBytes = loaded.memoryBytes > 0 ? loaded.memoryBytes : files.byteCount
        loadSeconds = Date().timeIntervalSince(started)
    }

    /// Whether the engine process holding the model still runs (false after it crashed: load the
    /// model again).
    public var isUsable: Bool { recognizer.isUsable }

    /// Transcribes mono 16 kHz samples in [-1, 1] (at most ``maximumDuration`` seconds) as
    /// `settings` say; what they leave nil, the model's language and task and the decoder's
    /// defaults decide (beam 5 with temperature fallback). Blocking.
    public func transcribe(_ samples: [Float], sampleRate: Int, settings: DecodeSettings) throws(SherpaOnnxError) -> Transcription {
        guard sampleRate == Self.sampleRate else { throw .invalidInput("sample rate \(sampleRate): the decoder takes \(Self.sampleRate) Hz") }
        let seconds = Double(samples.count) / Double(sampleRate)
        guard seconds <= Self.maximumDuration else { throw .inputTooLong(seconds: seconds, limit: Self.maximumDuration) }
        let language = settings.language ?? self.language ?? ""
        if samples.isEmpty { return Transcription(text: "", language: WhisperLanguage.bcp47(forWhisperCode: language)) }
        if concurrentDecoding { return try decode(samples, language: language, settings: settings) }
        serial.lock()
        defer { serial.unlock() }
        return try decode(samples, language: language, settings: settings)
    }

    /// The same, the earlier text (``DecodeSettings/previousText``) still to come: the engine
    /// computes the features and encodes the audio while `previousText` waits for it (the decode
    /// before). Blocking.
    public func transcribe(_ samples: [Float], sampleRate: Int, settings: DecodeSettings,
                           previousText: () -> String?) throws(SherpaOnnxError) -> Transcription {
        // A model that decodes one at a time would hold its turn while waiting for the decode before.
        guard concurrentDecoding, sampleRate == Self.sampleRate, !samples.isEmpty,
              Double(samples.count) / Double(sampleRate) <= Self.maximumDuration else {
            var settings = settings
            settings.previousText = previousText()
            return try transcribe(samples, sampleRate: sampleRate, settings: settings)
        }
        return try withoutActuallyEscaping(previousText) { previousText throws(SherpaOnnxError) in
            try decode(samples, language: settings.language ?? language ?? "", settings: settings, previousText: previousText)
        }
    }

    /// The rate every decode takes (earshotd resamples to it).
    public static let sampleRate = 16000

    /// One decode in the engine process; with `previousText`, the earlier text is sent once it
    /// gives it, the decode under way meanwhile.
    private func decode(_ samples: [Float], language: String, settings: DecodeSettings,
                        previousText: (() -> String?)? = nil) throws(SherpaOnnxError) -> Transcription {
        let request = try EngineObject.frame(EngineWhisperDecode(
            id: "", object: recognizer.name, sampleRate: Self.sampleRate, language: language, task: (settings.task ?? task).rawValue,
            beamSize: settings.beamSize, temperatures: settings.temperatures, prompt: settings.prompt, previousText: settings.previousText, context: settings.context,
            alternatives: settings.alternatives, previousTextFollows: previousText == nil ? nil : true), payload: EngineSamples.bytes(samples))
        let result = try recognizer.call(request, replying: EngineWhisperResult.self) { id throws(SherpaOnnxError) in
            if let previousText {
                _ = try self.recognizer.call(EngineObject.frame(EngineWhisperPreviousText(id: "", decode: id, text: previousText())),
                                        replying: EngineWhisperPreviousTextTaken.self)
            }
        }.0
        var transcription = Self.transcription(from: result, duration: Double(samples.count) / Double(Self.sampleRate))
        // The language asked for, else the one the model identified.
        transcription.language = WhisperLanguage.bcp47(forWhisperCode: language) ?? result.language.flatMap(WhisperLanguage.bcp47(forWhisperCode:))
        return transcription
    }

    /// Text, and words with times and confidences when the export gives token timestamps (Whisper
    /// tokens that start with a space begin a word). A word ends where its last token ends (token
    /// durations), else where the next word starts, else at the end of the audio. Sound captions
    /// are removed (``WhisperCaptions``).
    static func transcription(from result: EngineWhisperResult, duration: Double) -> Transcription {
        var text = result.text.trimmingCharacters(in: .whitespacesAndNewlines)
        var tokens: [WhisperToken] = []
        for (index, piece) in result.tokens.enumerated() where index < result.starts.count {
            tokens.append(WhisperToken(text: piece, id: result.tokenIDs.flatMap { index < $0.count ? $0[index] : nil }, start: result.starts[index],
                                       duration: result.durations.flatMap { index < $0.count ? $0[index] : nil },
                                       logProbability: result.logProbabilities.flatMap { index < $0.count ? $0[index] : nil }))
        }
        var confidence: Double?
        if let logProbabilities = result.logProbabilities, !logProbabilities.isEmpty {
            confidence = exp(logProbabilities.reduce(0, +) / Double(logProbabilities.count))
        }
        let measures = result.averageLogProbability.map { average in
            DecodeReport(averageLogProbability: average, noSpeechProbability: result.noSpeechProbability ?? 0,
                         compressionRatio: result.compressionRatio ?? 0, temperature: result.temperature ?? 0,
                         tokens: result.tokenIDs ?? [], languageProbability: result.languageProbability,
                         promptTokensDropped: (result.promptTokensDropped ?? 0) > 0 ? result.promptTokensDropped : nil)
        }
        var words = WhisperToken.words(tokens, duration: duration)
        if words.isEmpty {
            let pieces = text.split(separator: " ").map(String.init)
            let kept = WhisperCaptions.speech(in: pieces)
            if kept.count < pieces.count { text = kept.joined(separator: " ") }
        } else {
            let keep = WhisperCaptions.speechMask(words.map(\.text))
            if keep.contains(false) {
                words = zip(words, keep).filter(\.1).map(\.0)
                text = words.map(\.text).joined(separator: " ")
            }
        }
        return Transcription(text: text, words: words, alternatives: (result.alternatives ?? []).map(\.text).filter { $0 != text },
                             confidence: confidence, measures: measures)
    }
}

/// Whisper's sound captions — "(air whooshing)", "[MUSIC]", "♪" — describe no speech. OpenAI's
/// decoder (and faster-whisper's, by default) suppresses the tokens that open them, which
/// sherpa-onnx's does not; they are removed here instead, so that a caption is never taken for
/// words, and a segment that holds only one counts as a segment without text (``WindowTranscript``).
enum WhisperCaptions {
    private static let notes: Set<Character> = ["♪", "♩", "♫", "♬"]

    /// Which words are speech: not inside a caption that opens with "(" or "[" (to its closing
    /// bracket, or to the end when it never closes) and not made of music notes.
    static func speechMask(_ words: [String]) -> [Bool] {
        var closing: Character?
        return words.map { word in
            if let close = closing {
                if word.contains(close) { closing = nil }
                return false
            }
            if let first = word.first, first == "(" || first == "[" {
                let close: Character = first == "(" ? ")" : "]"
                if !word.dropFirst().contains(close) { closing = close }
                return false
            }
            return !(word.contains { notes.contains($0) } && word.allSatisfy { notes.contains($0) || $0.isPunctuation })
        }
    }

    /// The words that are speech.
    static func speech(in words: [String]) -> [String] {
        zip(words, speechMask(words)).filter(\.1).map(\.0)
    }
}

/// One decoded Whisper token with its time, as the engine reports it.
struct WhisperToken: Sendable, Hashable {
    var text: String
    var id: Int?
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
            words.append(RecognizedWord(text: text, start: start, end: end, confidence: confidence, tokens: group.compactMap(\.id)))
        }
        return words
    }
}
