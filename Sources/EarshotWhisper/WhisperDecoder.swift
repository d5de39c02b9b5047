import CZlib
import EarshotSystem
import EarshotEngineLink
import EarshotWire
import Foundation

/// Earshot's Whisper decoder, in the engine process: features, encoder, search with temperature
/// fallback, prompt and contextual strings, token times and the result's measures. One per loaded
/// model (one copy of its weights); language, task and search are per decode, so sessions of any
/// language, task or search share it. `decode` may run on several threads at once.
public final class WhisperDecoder: Sendable {
    /// The encoder's context: 30 s of feature frames.
    static let maxFrames = 3000
    /// Prompt tokens a decode keeps (OpenAI's bound: half the text context, less one).
    static let maxPromptTokens = DecodingOptions.maxPromptTokens

    let graphs: WhisperGraphs
    private let features: LogMel
    private let defaultLanguage: String
    private let defaultTask: String
    /// Feature frames of silence after each audio (Whisper needs some to write end-of-text).
    private let tailFrames: Int
    /// Runs the first search of decodes that wait at once together.
    private let batcher: DecodeBatcher<Prepared, FirstPass>

    /// Loads the model and decodes 1 s of silence (ONNX Runtime allocates its working memory on
    /// the first run). Blocking.
    public init(_ request: EngineWhisperLoad) throws {
        graphs = try WhisperGraphs(encoder: request.encoder, decoder: request.decoder, tokens: request.tokens, threads: request.threads)
        features = LogMel(mels: graphs.mels)
        defaultLanguage = request.language
        defaultTask = request.task
        let tail = request.tailFrames ?? EngineWhisperLoad.defaultTailFrames
        guard (0...EngineWhisperLoad.maxTailFrames).contains(tail) else {
            throw WhisperModelError.unsupported("a tail of \(tail) frames is outside 0…\(EngineWhisperLoad.maxTailFrames)")
        }
        tailFrames = tail
        batcher = DecodeBatcher(maxBatch: Self.maxBatch, maxRunning: Self.maxRunningBatches) { [graphs] in
            Self.firstPasses($0, graphs: graphs, deliver: $1)
        }
        _ = try decode([Float](repeating: 0, count: 16000), EngineWhisperDecode(id: "", object: request.object, sampleRate: 16000, beamSize: 1, temperatures: [0]))
    }

    deinit {
        MemoryReclaim.afterRelease()
    }

    /// ONNX Runtime's run-time version.
    public static var runtimeVersion: String { ONNXRuntime.version }

    /// Decodes 16 kHz mono samples (at most 29.5 s). Blocking. Decodes that run at once on one
    /// model are encoded and share their first search's decoder calls in a batch (``batcher``);
    /// the rest runs on the calling thread.
    public func decode(_ samples: [Float], _ request: EngineWhisperDecode) throws -> EngineWhisperResult {
        try finish(try batcher.run(try prepare(samples, request)))
    }

    /// Decodes 16 kHz mono samples whose earlier text (``EngineWhisperDecode/previousText``)
    /// `previousText` gives only once the decode before has ended (a conditioned recording's
    /// next window): the features are computed and the audio encoded on the calling thread while
    /// that decode runs, then the search waits for the text. Outside ``batcher``, as the
    /// windows of one recording decode one at a time anyway. Blocking.
    public func decode(_ samples: [Float], _ request: EngineWhisperDecode, previousText: () -> String?) throws -> EngineWhisperResult {
        let encoded = try Self.encode(try prepare(samples, request), graphs: graphs, early: true)
        var prompted = request
        prompted.previousText = previousText()
        let (prompt, dropped) = Self.prompt(prompted, phrases: encoded.prepared.phrases, vocabulary: graphs.vocabulary)
        let decode = encoded.prompted(prompt, dropped: dropped)
        let temperature = decode.prepared.options.temperatures[0]
        let initial = decode.initial(at: temperature)
        let start = try WhisperSearch.start([initial.tokens], sotIndices: [initial.sotIndex], cross: decode.cross, graphs: graphs)[0]
        let hypotheses = try decode.prepared.search.run(from: start, initialCount: initial.tokens.count, cross: decode.cross, temperature: temperature)
        return try finish(FirstPass(decode: decode, start: start, hypotheses: hypotheses))
    }

    /// Decodes several audios as one batch, whatever else runs (the batch ``decode(_:_:)``
    /// makes of decodes that wait at once). Blocking.
    func decode(together decodes: [(samples: [Float], request: EngineWhisperDecode)]) throws -> [EngineWhisperResult] {
        let prepared = try decodes.map { try prepare($0.samples, $0.request) }
        var passes = [Result<FirstPass, any Error>?](repeating: nil, count: prepared.count)
        Self.firstPasses(prepared, graphs: graphs) { passes[$0] = $1 }
        return try passes.map { try finish($0!.get()) }
    }

    /// Audios whose first search one batch runs together. The batch encodes them in turn (on the
    /// CPU a batch of encoder calls takes as long as the calls in turn), each straight into the
    /// batch's keys and values, so an audio's are never held twice; decodes waiting for a batch
    /// hold only their features. A model's audios encoded at once are thus at most
    /// ``maxBatch`` × ``maxRunningBatches``, however many sessions decode on it.
    static let maxBatch = 4
    /// Batches of one model that run at once, their decoder calls taking turns on the model's
    /// threads: a decode that arrives while a batch runs starts at once in another rather than
    /// wait for the first to end (a voice command behind a 20 s window's beam search).
    static let maxRunningBatches = 2

    /// One decode checked and its features computed, waiting for its batch to encode it.
    struct Prepared: @unchecked Sendable {
        // @unchecked: read only once made.
        let request: EngineWhisperDecode
        let options: WhisperSearchOptions
        let search: WhisperSearch
        /// Feature frames (frame-major), then the frames of silence after them.
        let features: [Float]
        let frames: Int
        let padding: Int
        /// The language asked for; empty: identify it (multilingual models only).
        let language: String
        /// The task's token (multilingual models only).
        let taskToken: Int?
        /// The prompt's tokens: the end of the recording's earlier text, then the user's prompt
        /// and contextual strings (their last ``maxPromptTokens``); at most ``maxPromptTokens``.
        let prompt: [Int]
        let promptTokensDropped: Int
        /// The contextual strings (the prompt's end and the search's bias).
        let phrases: [String]

        /// Tokens of the start sequence: start of transcript, language and task, no timestamps.
        var sequenceCount: Int { taskToken == nil ? 2 : 4 }

        /// Whether the prompt goes first at `temperature` (it goes above 0.5, as faster-whisper
        /// resets it: text that repeats itself in the prompt is what most often drives Whisper
        /// into a loop).
        func prompted(at temperature: Double) -> Bool { !prompt.isEmpty && temperature <= 0.5 }

        /// How many tokens the decoder is first given at `temperature`.
        func initialCount(at temperature: Double) -> Int { (prompted(at: temperature) ? prompt.count + 1 : 0) + sequenceCount }

        /// The same decode with another prompt.
        func prompting(_ prompt: [Int], dropped: Int) -> Prepared {
            Prepared(request: request, options: options, search: search, features: features, frames: frames, padding: padding,
                     language: language, taskToken: taskToken, prompt: prompt, promptTokensDropped: dropped, phrases: phrases)
        }
    }

    /// A decode with its audio encoded and its language known, ready to search.
    struct Encoded: @unchecked Sendable {
        // @unchecked: read only once made.
        let prepared: Prepared
        /// Its keys and values: its own, or a view of its batch's.
        let cross: CrossAttention
        /// The start sequence: start of transcript, language and task, no timestamps.
        let sequence: [Int]
        let language: String?
        let languageProbability: Double?
        let startOfPrevious: Int

        /// The same decode reading `cross` (its view of a batch's keys and values).
        func reading(_ cross: CrossAttention) -> Encoded {
            Encoded(prepared: prepared, cross: cross, sequence: sequence, language: language, languageProbability: languageProbability,
                    startOfPrevious: startOfPrevious)
        }

        /// The same decode with another prompt.
        func prompted(_ prompt: [Int], dropped: Int) -> Encoded {
            Encoded(prepared: prepared.prompting(prompt, dropped: dropped), cross: cross, sequence: sequence, language: language,
                    languageProbability: languageProbability, startOfPrevious: startOfPrevious)
        }

        /// What the decoder is first given at `temperature`.
        func initial(at temperature: Double) -> (tokens: [Int], sotIndex: Int) {
            let prompt = prepared.prompt, prompted = prepared.prompted(at: temperature)
            return ((prompted ? [startOfPrevious] + prompt : []) + sequence, prompted ? prompt.count + 1 : 0)
        }
    }

    /// A decode's search at its first temperature.
    struct FirstPass: @unchecked Sendable {
        // @unchecked: read only once made.
        let decode: Encoded
        let start: WhisperSearch.Start
        let hypotheses: [WhisperHypothesis]
    }

    /// The prompt's tokens for `request`: the end of the recording's earlier text, then the
    /// user's prompt and `phrases` (their last ``maxPromptTokens``, the rest counted as dropped),
    /// at most ``maxPromptTokens`` in all. Only the user's words are ever reported as dropped;
    /// earlier text fills the room they leave, as faster-whisper keeps the end of its.
    static func prompt(_ request: EngineWhisperDecode, phrases: [String], vocabulary: WhisperVocabulary) -> (tokens: [Int], dropped: Int) {
        var text = request.prompt?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        // A list, not a sentence: prompted with a full stop, a name alone was copied to the text's start.
        if !phrases.isEmpty { text += (text.isEmpty ? "" : " ") + phrases.joined(separator: ", ") }
        var tokens = text.isEmpty ? [] : vocabulary.encode(" " + text)
        let dropped = max(0, tokens.count - maxPromptTokens)
        tokens.removeFirst(dropped)
        let previous = request.previousText?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        if !previous.isEmpty, tokens.count < maxPromptTokens {
            tokens = vocabulary.encode(" " + previous).suffix(maxPromptTokens - tokens.count) + tokens
        }
        return (tokens, dropped)
    }

    /// Checks the request and computes the features and the prompt; the audio is encoded by its
    /// batch.
    private func prepare(_ samples: [Float], _ request: EngineWhisperDecode) throws -> Prepared {
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
        let language = vocabulary.isMultilingual ? request.language ?? defaultLanguage : "en"
        if vocabulary.isMultilingual, !language.isEmpty, vocabulary.languageToken(language) == nil {
            throw WhisperModelError.unsupported("the model has no language \"\(language)\"")
        }

        let mel = features.features(samples)
        let frames = min(mel.frames, Self.maxFrames - 50)
        let padding = min(frames + tailFrames, Self.maxFrames) - frames

        let phrases = (request.context ?? []).map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }.filter { !$0.isEmpty }
        let (prompt, dropped) = Self.prompt(request, phrases: phrases, vocabulary: vocabulary)
        let search = WhisperSearch(graphs: graphs, options: options, bias: phrases.isEmpty ? nil : ContextBias(phrases: phrases, vocabulary: vocabulary))
        return Prepared(request: request, options: options, search: search, features: mel.values, frames: frames, padding: padding,
                        language: language, taskToken: vocabulary.isMultilingual ? (task == "translate" ? vocabulary.translate : vocabulary.transcribe) : nil,
                        prompt: prompt, promptTokensDropped: dropped, phrases: phrases)
    }

    /// Runs the encoder over `decode`'s features and picks its language (identified when none
    /// was asked for). Blocking.
    private static func encode(_ decode: Prepared, graphs: WhisperGraphs, early: Bool = false) throws -> Encoded {
        let vocabulary = graphs.vocabulary
        let cross = try graphs.encode(decode.features, frames: decode.frames, padding: decode.padding, early: early)
        var sequence = [vocabulary.startOfTranscript]
        var language: String? = "en"
        var languageProbability: Double?
        if let taskToken = decode.taskToken {
            language = decode.language
            if decode.language.isEmpty {
                let identified = try identifyLanguage(cross, graphs: graphs)
                (language, languageProbability) = (identified.code, identified.probability)
            }
            guard let code = language, let token = vocabulary.languageToken(code) else {
                throw WhisperModelError.unsupported("the model has no language \"\(language ?? "")\"")
            }
            sequence += [token, taskToken]
        }
        sequence.append(vocabulary.noTimestamps)
        return Encoded(prepared: decode, cross: cross, sequence: sequence, language: language, languageProbability: languageProbability,
                       startOfPrevious: vocabulary.startOfPrevious)
    }

    /// The first temperature's search of a batch of decodes: those with as many initial tokens,
    /// the same temperature and as many sequences are encoded, one after another, into one set of
    /// keys and values and advance together, one decoder call per step; each decode's pass goes to
    /// `deliver` as soon as its search ends.
    private static func firstPasses(_ decodes: [Prepared], graphs: WhisperGraphs, deliver: (Int, Result<FirstPass, any Error>) -> Void) {
        struct Key: Hashable {
            var initialCount: Int
            var temperature: Double
            var beamSize: Int
        }
        var groups: [Key: [Int]] = [:], order: [Key] = []
        for (index, decode) in decodes.enumerated() {
            let temperature = decode.options.temperatures[0]
            let key = Key(initialCount: decode.initialCount(at: temperature), temperature: temperature,
                          beamSize: temperature > 0 ? decode.options.bestOf : decode.options.beamSize)
            if groups[key] == nil { order.append(key) }
            groups[key, default: []].append(index)
        }
        for key in order {
            // Longest audio first: its keys and values size the batch's, and a batch's shorter
            // audios tend to end first, which leaves the others' where they are
            // (``CrossAttention/audios(_:)``).
            let sorted = groups[key]!.sorted { decodes[$0].frames + decodes[$0].padding > decodes[$1].frames + decodes[$1].padding }
            var members: [Int] = [], encoded: [Encoded] = []
            var batch: CrossAttentionBatch?
            for member in sorted {
                do {
                    let own = try encode(decodes[member], graphs: graphs)
                    if sorted.count == 1 {
                        encoded.append(own)
                    } else {
                        if batch == nil { batch = try CrossAttentionBatch(audios: sorted.count, longest: own.cross) }
                        let slot = batch!.place(own.cross)
                        encoded.append(own.reading(try batch!.audio(slot)))
                    }
                    members.append(member)
                } catch {
                    deliver(member, .failure(error))
                }
            }
            guard !encoded.isEmpty else { continue }
            var delivered = Set<Int>()
            do {
                let cross = try batch.map { try $0.placed() } ?? encoded[0].cross
                let initials = encoded.map { $0.initial(at: key.temperature) }
                let starts = try WhisperSearch.start(initials.map(\.tokens), sotIndices: initials.map(\.sotIndex), cross: cross, graphs: graphs)
                try WhisperSearch.run(members.map { decodes[$0].search }, from: starts, initialCount: key.initialCount,
                                      cross: cross, temperature: key.temperature) { slot, hypotheses in
                    delivered.insert(members[slot])
                    deliver(members[slot], .success(FirstPass(decode: encoded[slot], start: starts[slot], hypotheses: hypotheses)))
                }
            } catch {
                for member in members where !delivered.contains(member) { deliver(member, .failure(error)) }
            }
        }
    }

    /// Temperature fallback after the first pass, the choice among the temperatures tried, word
    /// times and the result.
    private func finish(_ first: FirstPass) throws -> EngineWhisperResult {
        let decode = first.decode, prepared = decode.prepared
        let vocabulary = graphs.vocabulary, options = prepared.options, request = prepared.request
        let search = prepared.search, cross = decode.cross
        var starts: [Int: WhisperSearch.Start] = [decode.initial(at: options.temperatures[0]).tokens.count: first.start]
        // Each temperature's best result and whether it passed; the first that passes is kept.
        var tried: [(hypotheses: [WhisperHypothesis], temperature: Double, ratio: Double, start: WhisperSearch.Start)] = []
        for (attempt, temperature) in options.temperatures.enumerated() {
            let initial = decode.initial(at: temperature)
            let start: WhisperSearch.Start
            let found: [WhisperHypothesis]
            if attempt == 0 {
                (start, found) = (first.start, first.hypotheses)
            } else {
                if starts[initial.tokens.count] == nil {
                    starts[initial.tokens.count] = try WhisperSearch.start([initial.tokens], sotIndices: [initial.sotIndex], cross: cross, graphs: graphs)[0]
                }
                start = starts[initial.tokens.count]!
                found = try search.run(from: start, initialCount: initial.tokens.count, cross: cross, temperature: temperature)
            }
            guard let best = found.first else { continue }
            // A phrase repeated back to back counts as repetition too: zlib cannot see it in text as
            // short as a voice command ("turn off the bedroom pan turn off the bedroom pan turn").
            let ratio = Self.repeatsAPhrase(best.tokens) ? .infinity : Self.compressionRatio(vocabulary.text(best.tokens))
            tried.append((found, temperature, ratio, start))
            let unsure = best.averageLogProbability < options.logProbThreshold
            if start.noSpeechProbability > options.noSpeechThreshold && unsure { break }
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
            return EngineWhisperResult(id: request.id, text: "", language: decode.language, tokens: [], starts: [], durations: nil, logProbabilities: nil)
        }
        let start = chosen.start
        let silence = start.noSpeechProbability > options.noSpeechThreshold && best.averageLogProbability < options.logProbThreshold
        if silence { best.tokens = [] }
        let text = vocabulary.text(best.tokens)
        let times = try align(best.tokens, sequence: decode.sequence, cross: cross, frames: prepared.frames)
        let alternatives = chosen.hypotheses.dropFirst().prefix(max(0, request.alternatives ?? 0)).map {
            EngineWhisperAlternative(text: vocabulary.text($0.tokens).trimmingCharacters(in: .whitespaces), averageLogProbability: $0.averageLogProbability)
        }
        return EngineWhisperResult(
            id: request.id, text: text, language: decode.language,
            tokens: best.tokens.map { String(decoding: vocabulary.bytes[$0], as: UTF8.self) }, starts: times.starts,
            durations: times.durations, logProbabilities: silence ? [] : best.logProbabilities, tokenIDs: best.tokens,
            averageLogProbability: best.averageLogProbability, noSpeechProbability: start.noSpeechProbability,
            compressionRatio: Self.compressionRatio(text), temperature: chosen.temperature, languageProbability: decode.languageProbability,
            alternatives: request.alternatives == nil ? nil : Array(alternatives), promptTokensDropped: prepared.promptTokensDropped)
    }

    /// The most probable language and its probability: the start-of-transcript token's next
    /// token, over language tokens only.
    private static func identifyLanguage(_ cross: CrossAttention, graphs: WhisperGraphs) throws -> (code: String, probability: Double) {
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
