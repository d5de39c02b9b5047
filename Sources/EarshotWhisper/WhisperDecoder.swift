import CZlib
import EarshotSystem
import EarshotWire
import Foundation

/// Earshot's Whisper decoder, in the engine process: features, encoder, search with temperature
/// fallback, prompt and contextual strings, token times and the result's measures. One per loaded
/// model (one copy of its weights); language, task and search are per decode, so sessions of any
/// language, task or search share it. `decode` may run on several threads at once.
public final class WhisperDecoder: Sendable {
    /// Feature frames of silence after the audio (Whisper needs some to write end-of-text).
    static let tailFrames = 1000
    /// The encoder's context: 30 s of feature frames.
    static let maxFrames = 3000
    /// Prompt tokens a decode keeps (OpenAI's bound: half the text context, less one).
    static let maxPromptTokens = DecodingOptions.maxPromptTokens

    let graphs: WhisperGraphs
    private let features: LogMel
    private let defaultLanguage: String
    private let defaultTask: String

    /// Loads the model and decodes 1 s of silence (ONNX Runtime allocates its working memory on
    /// the first run). Blocking.
    public init(_ request: EngineWhisperLoad) throws {
        graphs = try WhisperGraphs(encoder: request.encoder, decoder: request.decoder, tokens: request.tokens, threads: request.threads)
        features = LogMel(mels: graphs.mels)
        defaultLanguage = request.language
        defaultTask = request.task
        _ = try decode([Float](repeating: 0, count: 16000), EngineWhisperDecode(id: "", object: request.object, sampleRate: 16000, beamSize: 1, temperatures: [0]))
    }

    deinit {
        MemoryReclaim.afterRelease()
    }

    /// ONNX Runtime's run-time version.
    public static var runtimeVersion: String { ONNXRuntime.version }

    /// Decodes 16 kHz mono samples (at most 29.5 s). Blocking.
    public func decode(_ samples: [Float], _ request: EngineWhisperDecode) throws -> EngineWhisperResult {
        let vocabulary = graphs.vocabulary
        guard request.sampleRate == LogMel.sampleRate else {
            throw WhisperModelError.unsupported("the decoder takes 16000 Hz audio, not \(request.sampleRate) Hz")
        }
        var options = WhisperSearchOptions()
        if let beam = request.beamSize { options.beamSize = beam }
        if let temperatures = request.temperatures { options.temperatures = temperatures }
        guard (1...EngineWhisperDecode.maxBeamSize).contains(options.beamSize) else {
            throw WhisperModelError.unsupported("beam size \(options.beamSize) is outside 1…\(EngineWhisperDecode.maxBeamSize)")
        }
        guard !options.temperatures.isEmpty, options.temperatures.allSatisfy({ (0...1).contains($0) }) else {
            throw WhisperModelError.unsupported("temperatures must lie in [0, 1]")
        }
        let task = request.task ?? defaultTask
        guard task == "transcribe" || task == "translate" else { throw WhisperModelError.unsupported("unknown task \"\(task)\"") }

        let mel = features.features(samples)
        let frames = min(mel.frames, Self.maxFrames - 50)
        let padding = min(frames + Self.tailFrames, Self.maxFrames) - frames
        let cross = try graphs.encode(mel.values, frames: frames, padding: padding)

        var language: String?
        var languageProbability: Double?
        var sequence = [vocabulary.startOfTranscript]
        if vocabulary.isMultilingual {
            let wanted = request.language ?? defaultLanguage
            if wanted.isEmpty {
                let identified = try identifyLanguage(cross)
                language = identified.code
                languageProbability = identified.probability
            } else {
                language = wanted
            }
            guard let code = language, let token = vocabulary.languageToken(code) else {
                throw WhisperModelError.unsupported("the model has no language \"\(language ?? "")\"")
            }
            sequence += [token, task == "translate" ? vocabulary.translate : vocabulary.transcribe]
        } else {
            language = "en"
        }
        sequence.append(vocabulary.noTimestamps)

        var promptText = request.prompt?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        let phrases = (request.context ?? []).map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }.filter { !$0.isEmpty }
        if !phrases.isEmpty { promptText += (promptText.isEmpty ? "" : " ") + phrases.joined(separator: ", ") + "." }
        var prompt = promptText.isEmpty ? [] : vocabulary.encode(" " + promptText)
        let dropped = max(0, prompt.count - Self.maxPromptTokens)
        prompt.removeFirst(dropped)
        let search = WhisperSearch(graphs: graphs, options: options, bias: phrases.isEmpty ? nil : ContextBias(phrases: phrases, vocabulary: vocabulary))
        /// The first decoder call over the prompt (when given) and the start sequence.
        func begin(prompted: Bool) throws -> (start: WhisperSearch.Start, count: Int) {
            let initial = (prompted ? [vocabulary.startOfPrevious] + prompt : []) + sequence
            return (try search.start(initial, sotIndex: prompted ? prompt.count + 1 : 0, cross: cross), initial.count)
        }
        let prompted = try begin(prompted: !prompt.isEmpty)
        var unprompted: (start: WhisperSearch.Start, count: Int)?
        // Each temperature's best result and whether it passed; the first that passes is kept.
        var tried: [(hypotheses: [WhisperHypothesis], temperature: Double, ratio: Double, start: WhisperSearch.Start)] = []
        for temperature in options.temperatures {
            // Above 0.5 the prompt goes (faster-whisper's prompt reset): text that repeats itself
            // in the prompt is what most often drives Whisper into a loop.
            var begun = prompted
            if temperature > 0.5 && !prompt.isEmpty {
                if unprompted == nil { unprompted = try begin(prompted: false) }
                begun = unprompted!
            }
            let found = try search.run(from: begun.start, initialCount: begun.count, cross: cross, temperature: temperature)
            guard let best = found.first else { continue }
            // A phrase repeated back to back counts as repetition too: zlib cannot see it in text as
            // short as a voice command ("turn off the bedroom pan turn off the bedroom pan turn").
            let ratio = Self.repeatsAPhrase(best.tokens) ? .infinity : Self.compressionRatio(vocabulary.text(best.tokens))
            tried.append((found, temperature, ratio, begun.start))
            let unsure = best.averageLogProbability < options.logProbThreshold
            if begun.start.noSpeechProbability > options.noSpeechThreshold && unsure { break }
            if ratio <= options.compressionRatioThreshold && !unsure { break }
        }
        // When every temperature failed, faster-whisper's choice: the most probable of those that do
        // not repeat themselves, else the most probable.
        let passing = tried.last.map { last in
            last.ratio <= options.compressionRatioThreshold && last.hypotheses[0].averageLogProbability >= options.logProbThreshold
        } ?? false
        let unrepeated = tried.filter { $0.ratio <= options.compressionRatioThreshold }
        let chosen = passing ? tried.last : (unrepeated.isEmpty ? tried : unrepeated).max {
            $0.hypotheses[0].averageLogProbability < $1.hypotheses[0].averageLogProbability
        }
        guard let chosen, var best = chosen.hypotheses.first else {
            return EngineWhisperResult(id: request.id, text: "", language: language, tokens: [], starts: [], durations: nil, logProbabilities: nil)
        }
        let kept = (hypotheses: chosen.hypotheses, temperature: chosen.temperature)
        let start = chosen.start
        let silence = start.noSpeechProbability > options.noSpeechThreshold && best.averageLogProbability < options.logProbThreshold
        if silence { best.tokens = [] }
        let text = vocabulary.text(best.tokens)
        let times = try align(best.tokens, sequence: sequence, cross: cross, frames: frames)
        let alternatives = kept.hypotheses.dropFirst().prefix(max(0, request.alternatives ?? 0)).map {
            EngineWhisperAlternative(text: vocabulary.text($0.tokens).trimmingCharacters(in: .whitespaces), averageLogProbability: $0.averageLogProbability)
        }
        return EngineWhisperResult(
            id: request.id, text: text, language: language,
            tokens: best.tokens.map { String(decoding: vocabulary.bytes[$0], as: UTF8.self) }, starts: times.starts,
            durations: times.durations, logProbabilities: silence ? [] : best.logProbabilities, tokenIDs: best.tokens,
            averageLogProbability: best.averageLogProbability, noSpeechProbability: start.noSpeechProbability,
            compressionRatio: Self.compressionRatio(text), temperature: kept.temperature, languageProbability: languageProbability,
            alternatives: request.alternatives == nil ? nil : Array(alternatives), promptTokensDropped: dropped)
    }

    /// The most probable language and its probability: the start-of-transcript token's next
    /// token, over language tokens only.
    private func identifyLanguage(_ cross: CrossAttention) throws -> (code: String, probability: Double) {
        let vocabulary = graphs.vocabulary
        let step = try graphs.step([[vocabulary.startOfTranscript]], cache: nil, cross: cross)
        let row = step.logits(sequence: 0, position: 0)
        let logits = vocabulary.languages.map { row[$0.token] }
        let probabilities = WhisperSearch.logSoftmax(logits).map(exp)
        let best = probabilities.indices.max { probabilities[$0] < probabilities[$1] } ?? 0
        return (vocabulary.languages[best].code, probabilities[best])
    }

    /// Token times: one decoder call over the start sequence, the text and end-of-text, without
    /// the prompt (OpenAI aligns words the same way).
    private func align(_ tokens: [Int], sequence: [Int], cross: CrossAttention, frames: Int) throws -> (starts: [Double], durations: [Double]) {
        guard !tokens.isEmpty, graphs.alignmentHeads > 0 else { return ([], []) }
        let all = sequence + tokens + [graphs.vocabulary.endOfText]
        let step = try graphs.step([all], cache: nil, cross: cross, attention: true)
        guard let attention = step.attention else { return ([], []) }
        let shape = attention.shape
        return TokenAlignment.times(attention: attention.floats(), heads: shape[1], rows: shape[2], columns: shape[3],
                                    firstRow: sequence.count - 1, textCount: tokens.count, frames: frames / 2)
    }

    /// Whether `tokens` hold a phrase of at least ``repeatedPhraseTokens`` tokens said twice in a
    /// row, then begun a third time: a decode caught in a loop.
    static func repeatsAPhrase(_ tokens: [Int]) -> Bool {
        let count = tokens.count
        guard count >= 2 * repeatedPhraseTokens + 1 else { return false }
        for length in repeatedPhraseTokens...(count / 2) {
            for start in 0...(count - 2 * length) where tokens[start..<(start + length)] == tokens[(start + length)..<(start + 2 * length)] {
                let next = start + 2 * length
                if next < count && tokens[next] == tokens[start] { return true }
            }
        }
        return false
    }

    /// The shortest phrase ``repeatsAPhrase(_:)`` looks for.
    static let repeatedPhraseTokens = 3

    /// The UTF-8 text's length over its zlib-compressed length (OpenAI's repetition measure).
    static func compressionRatio(_ text: String) -> Double {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty else { return 0 }
        var size = compressBound(uLong(bytes.count))
        var out = [UInt8](repeating: 0, count: Int(size))
        guard compress2(&out, &size, bytes, uLong(bytes.count), Z_DEFAULT_COMPRESSION) == Z_OK, size > 0 else { return 0 }
        return Double(bytes.count) / Double(size)
    }
}
