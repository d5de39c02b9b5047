import CPocketSphinx
import EarshotLanguageModel
import EarshotSystem
import Foundation

/// One PocketSphinx decoder: make one per session (decoders hold per-stream search and
/// normalization state and cannot be shared). Each holds its own copy of the acoustic model,
/// dictionary and language model (about 95 MB with the US English model) and takes ~0.3 s to
/// create.
///
/// Every call blocks (decoding runs at roughly 0.2× real time on one core): run them on a
/// dedicated thread (`BlockingWork`), never on the Swift cooperative pool. Calls are serialized by
/// an internal lock, so handing the decoder from thread to thread is safe; use it from one thread
/// at a time anyway, since concurrent calls just wait for each other.
///
/// An utterance is `startUtterance()`, any number of `process(_:)` calls (with `partial()` for
/// volatile results), then `endUtterance(alternatives:)`. Word times are seconds from the
/// utterance's first sample: every utterance restarts the stream (`ps_start_stream`) and
/// PocketSphinx's own silence removal is off, so times are never shifted by earlier audio or by
/// dropped frames. Keep utterances bounded (VAD segments, up to a minute or so): search and
/// lattice memory grow with their length. `decodeUtterance(_:alternatives:)` decodes a segment
/// already complete in one call, with whole-utterance cepstral normalization — more accurate
/// than streaming the same audio.
///
/// Custom vocabulary: `addWords(_:)` adds words with pronunciations (ARPAbet phones of the
/// acoustic model, e.g. `"HH AH L OW"`) to the dictionary and, as unigrams, to the language model;
/// `setContextualPhrases(_:weight:)` raises the language-model weight of phrases of dictionary
/// words (contextual strings).
public final class PocketSphinxDecoder: @unchecked Sendable {
    /// The model this decoder loaded.
    public let model: PocketSphinxModel
    /// Feature frames per second (`-frate`, 100 unless overridden): the unit of word times.
    public let frameRate: Int

    private let decoder: OpaquePointer
    private let config: OpaquePointer
    private let argumentVector: PocketSphinxArgumentVector
    private let lock = NSLock()
    /// The search `ps_init` made from the model's language model, and that model (a reference of
    /// our own: the search is freed while a contextual one replaces it).
    private let baseSearch: String
    private let baseModel: OpaquePointer
    // Guarded by `lock`.
    /// Contextual phrases and their weight; their search is selected while `phrases` is not empty.
    private var context: (phrases: [[String]], weight: Double) = ([], defaultContextWeight)
    /// A custom language model (ARPA text) and its weight, interpolated beside the phrases.
    private var custom: (arpa: String, weight: Double)?
    /// The selected search: the base one, or a contextual one (only one exists at a time).
    private var currentSearch: String
    private var contextSearches = 0
    private var inUtterance = false
    private var samplesInUtterance = 0
    private var scratch: [Int16] = []

    /// Loads a decoder for `model` (blocking, ~0.3 s). Throws `missingModelFile` if a file
    /// vanished since the model was described.
    public init(model: PocketSphinxModel) throws(PocketSphinxError) {
        _ = PocketSphinxLogging.silenced
        try model.validate()
        let argumentVector = PocketSphinxArgumentVector(["earshot"] + model.arguments)
        guard let config = cmd_ln_parse_r(nil, ps_args(), argumentVector.count, argumentVector.pointer, 1) else {
            throw .configurationRejected(arguments: model.arguments)
        }
        guard let decoder = ps_init(config) else {
            cmd_ln_free_r(config)
            throw .decoderCreationFailed(model)
        }
        let baseSearch = ps_get_search(decoder).map { String(cString: $0) } ?? "_default"
        guard let baseModel = ps_get_lm(decoder, baseSearch).flatMap(ngram_model_retain) else {
            ps_free(decoder)
            cmd_ln_free_r(config)
            throw .decoderCreationFailed(model)
        }
        self.model = model
        self.argumentVector = argumentVector
        self.config = config
        self.decoder = decoder
        self.baseSearch = baseSearch
        self.baseModel = baseModel
        currentSearch = baseSearch
        frameRate = max(1, cmd_ln_int_r(config, "-frate"))
        LiveObjects.created("PocketSphinxDecoder")
    }

    deinit {
        ps_free(decoder)
        ngram_model_free(baseModel)
        cmd_ln_free_r(config)
        // ~95 MB in many small blocks, freed into the arena of the thread that loaded them.
        MemoryReclaim.afterRelease()
        // Last, so whoever sees the count drop also sees the memory freed and its trim queued.
        LiveObjects.destroyed("PocketSphinxDecoder")
        // `argumentVector` is released after this, once nothing points into it.
    }

    /// Whether an utterance is open.
    public var isInUtterance: Bool {
        lock.lock()
        defer { lock.unlock() }
        return inUtterance
    }

    /// Seconds of audio given to the open (or last) utterance.
    public var utteranceDuration: Double {
        lock.lock()
        defer { lock.unlock() }
        return Double(samplesInUtterance) / Double(PocketSphinxModel.sampleRate)
    }

    /// Opens an utterance; its word times start at 0.
    public func startUtterance() throws(PocketSphinxError) {
        lock.lock()
        defer { lock.unlock() }
        try openUtterance()
    }

    /// Feeds 16 kHz mono samples in [-1, 1] to the open utterance.
    public func process(_ samples: some Collection<Float>) throws(PocketSphinxError) {
        lock.lock()
        defer { lock.unlock() }
        guard inUtterance else { throw .noUtterance }
        try feed(samples, wholeUtterance: false)
    }

    /// The current hypothesis of the open utterance (volatile: it may still change), with word
    /// times but no confidences (PocketSphinx has posteriors only for finished utterances).
    /// `nil` before any word is recognized or outside an utterance.
    public func partial() -> Transcription? {
        lock.lock()
        defer { lock.unlock() }
        guard inUtterance else { return nil }
        var score: Int32 = 0
        guard ps_get_hyp(decoder, &score) != nil else { return nil }
        let words = segmentWords(withConfidence: false)
        guard !words.isEmpty else { return nil }
        return Transcription(text: words.map(\.text).joined(separator: " "), words: words)
    }

    /// Closes the open utterance and returns its final result: words with times and posteriors,
    /// the utterance confidence and up to `alternatives` other hypotheses from the n-best list
    /// (distinct, excluding the best text).
    public func endUtterance(alternatives: Int = 0) throws(PocketSphinxError) -> Transcription {
        lock.lock()
        defer { lock.unlock() }
        guard inUtterance else { throw .noUtterance }
        return try closeUtterance(alternatives: alternatives)
    }

    /// Decodes one complete utterance (16 kHz mono, [-1, 1]) in a single call, normalizing over
    /// the whole segment; same result shape as `endUtterance(alternatives:)`.
    public func decodeUtterance(_ samples: some Collection<Float>, alternatives: Int = 0) throws(PocketSphinxError) -> Transcription {
        lock.lock()
        defer { lock.unlock() }
        try openUtterance()
        do {
            try feed(samples, wholeUtterance: true)
        } catch {
            _ = ps_end_utt(decoder)
            inUtterance = false
            throw error
        }
        return try closeUtterance(alternatives: alternatives)
    }

    /// Adds words with pronunciations (whitespace-separated phones of the acoustic model, e.g.
    /// `("earshot", "IH R SH AA T")`) to the dictionary and language model; call between
    /// utterances. A word already known gets the pronunciation as an extra variant unless it
    /// already has it. Words are case-sensitive (the US English dictionary is lower-case).
    /// Everything is checked before anything is added; the search is rebuilt once per call
    /// (~0.1 s). Returns how many pronunciations were added.
    @discardableResult
    public func addWords(_ entries: [(word: String, phones: String)]) throws(PocketSphinxError) -> Int {
        lock.lock()
        defer { lock.unlock() }
        guard !inUtterance else { throw .utteranceInProgress }
        let additions = try plannedAdditions(entries)
        guard !additions.isEmpty else { return 0 }
        let hadContext = currentSearch != baseSearch
        try add(additions)
        if hadContext { try installContextSearch() }
        return additions.count
    }

    /// The dictionary entries `entries` need: new words, or numbered variants of known ones.
    private func plannedAdditions(_ entries: [(word: String, phones: String)]) throws(PocketSphinxError) -> [(entry: String, phones: String)] {
        // 1. Check words and phones.
        var checked: [(word: String, phones: String)] = []
        for (word, phones) in entries {
            try checkWord(word)
            checked.append((word, try normalizedPhones(phones, word: word)))
        }

        // 2. Decide the dictionary entries: new words, or numbered variants of known ones.
        var additions: [(entry: String, phones: String)] = []
        var planned: [String: [String]] = [:]
        for (word, phones) in checked {
            var known = knownPronunciations(of: word)
            known += planned[word, default: []]
            guard !known.contains(phones) else { continue }
            additions.append((known.isEmpty ? word : "\(word)(\(known.count + 1))", phones))
            planned[word, default: []].append(phones)
        }

        return additions
    }

    /// Adds dictionary entries on the base search, rebuilding it after the last one (every one
    /// when the phone set is unknown, since a pronunciation may then still be refused midway).
    /// ps_add_word adds to every n-gram search, and sphinxbase's model sets add the wrong word to
    /// their submodels, so a contextual search is replaced by the base one first.
    private func add(_ additions: [(entry: String, phones: String)]) throws(PocketSphinxError) {
        guard !additions.isEmpty else { return }
        try selectBaseSearch()
        let updateEach = model.phones == nil
        for (index, addition) in additions.enumerated() {
            let update: Int32 = updateEach || index == additions.count - 1 ? 1 : 0
            let id = ps_add_word(decoder, addition.entry, addition.phones, update)
            guard id >= 0 else { throw .callFailed(function: "ps_add_word(\(addition.entry))", code: id) }
        }
    }

    /// How much of the language-model probability the contextual phrases get by default.
    public static let defaultContextWeight = 0.1

    /// Biases recognition towards `phrases`, each a sequence of words the dictionary has or
    /// `newWords` adds (as ``addWords(_:)`` does): a small n-gram model of the phrases (their words
    /// uniformly, and each word followed by the next inside a phrase) is interpolated with the base
    /// model, `weight` to `1 − weight` (an `ngram_model_set`, searched in place of the base search).
    /// Words outside the phrases keep `1 − weight` of their base probability; a phrase word gets at
    /// least `weight / (words + 1)` wherever it appears. An empty list returns to the base model.
    /// Call between utterances; the search is rebuilt (~0.4 s, twice when words are added). Words
    /// added later keep the phrases.
    public func setContextualPhrases(_ phrases: [[String]], adding newWords: [(word: String, phones: String)] = [],
                                     weight: Double = defaultContextWeight) throws(PocketSphinxError) {
        lock.lock()
        defer { lock.unlock() }
        guard !inUtterance else { throw .utteranceInProgress }
        guard weight > 0, weight < 1 else { throw .invalidOption("the contextual weight must be between 0 and 1 (exclusive)") }
        let additions = try plannedAdditions(newWords)
        let phrases = phrases.filter { !$0.isEmpty }
        let adding = Set(newWords.map(\.word))
        for word in phrases.joined() where !adding.contains(word) && lookUp(word) == nil {
            throw .invalidWord(word, reason: "not in the dictionary")
        }
        try add(additions)
        context = (phrases, weight)
        try installContextSearch()
    }

    /// How much of the language-model probability a custom language model gets by default
    /// (measured on spoken chess commands: Docs/CUSTOM_LANGUAGE_MODELS.md).
    public static let defaultCustomModelWeight = 0.5

    /// Interpolates the custom language model `model` (a compiled `SFCustomLanguageModelData`)
    /// with the base model, `weight` to `1 − weight`, after adding its pronunciations and
    /// `newWords` as ``addWords(_:)`` does (nil: removes it). With contextual phrases as well, the
    /// phrases keep their weight and the two models share the rest. Call between utterances.
    public func setCustomLanguageModel(_ model: CompiledLanguageModel?, adding newWords: [(word: String, phones: String)] = [],
                                       weight: Double = defaultCustomModelWeight) throws(PocketSphinxError) {
        lock.lock()
        defer { lock.unlock() }
        guard !inUtterance else { throw .utteranceInProgress }
        guard weight > 0, weight < 1 else { throw .invalidOption("the custom language model's weight must be between 0 and 1 (exclusive)") }
        let pronounced = (model?.pronunciations ?? [:]).sorted { $0.key < $1.key }.flatMap { word, phones in phones.map { (word: word, phones: $0) } }
        let additions = try plannedAdditions(pronounced + newWords)
        try add(additions)
        custom = model.map { ($0.arpa, weight) }
        try installContextSearch()
    }

    /// The phrases ``setContextualPhrases(_:weight:)`` installed (empty: the base model).
    public var contextualPhrases: [[String]] {
        lock.lock()
        defer { lock.unlock() }
        return context.phrases
    }

    /// The dictionary pronunciation of `word` (`ps_lookup_word`; variants are `word(2)`, …), or
    /// `nil` if the dictionary does not have it.
    public func pronunciation(of word: String) -> String? {
        lock.lock()
        defer { lock.unlock() }
        return lookUp(word)
    }

    // MARK: - Internals (called with `lock` held)

    /// Selects a new n-gram search on `model` named `name`, then frees the one it replaces (one
    /// search's lexicon tree is ~70 MB with the US English dictionary).
    private func selectSearch(_ name: String, on model: OpaquePointer) throws(PocketSphinxError) {
        let code = ps_set_lm(decoder, name, model)
        guard code >= 0 else { throw .callFailed(function: "ps_set_lm(\(name))", code: code) }
        let selected = ps_set_search(decoder, name)
        guard selected >= 0 else { throw .callFailed(function: "ps_set_search(\(name))", code: selected) }
        if currentSearch != name { _ = ps_unset_search(decoder, currentSearch) }
        currentSearch = name
    }

    /// The base search, rebuilt if a contextual one replaced it.
    private func selectBaseSearch() throws(PocketSphinxError) {
        guard currentSearch != baseSearch else { return }
        try selectSearch(baseSearch, on: baseModel)
    }

    /// Builds and selects the search over the base model interpolated with the contextual
    /// phrases and the custom model (the base search when there are neither).
    private func installContextSearch() throws(PocketSphinxError) {
        var parts: [(name: String, arpa: String, weight: Double)] = []
        if !context.phrases.isEmpty { parts.append(("context", Self.arpa(context.phrases), context.weight)) }
        if let custom { parts.append(("custom", custom.arpa, custom.weight * (1 - (parts.first?.weight ?? 0)))) }
        guard !parts.isEmpty else { return try selectBaseSearch() }
        // The set owns its submodels: it takes the others and a reference to the base one.
        var models: [OpaquePointer?] = [ngram_model_retain(baseModel)]
        for part in parts {
            do {
                models.append(try readModel(part.arpa, name: part.name))
            } catch {
                models.forEach { ngram_model_free($0) }
                throw error
            }
        }
        var weights: [Float] = [Float(1 - parts.reduce(0) { $0 + $1.weight })] + parts.map { Float($0.weight) }
        let set = Self.withCStrings(["base"] + parts.map(\.name)) { ngram_model_set_init(config, &models, $0, &weights, Int32(models.count)) }
        guard let set else {
            models.forEach { ngram_model_free($0) }
            throw .callFailed(function: "ngram_model_set_init", code: -1)
        }
        // The search keeps its own reference.
        defer { ngram_model_free(set) }
        // Two names in turn: a search is never replaced while it is the selected one.
        contextSearches += 1
        try selectSearch("earshot-context-\(contextSearches % 2)", on: set)
    }

    /// An n-gram model read from ARPA `text`. sphinxbase reads models from files only: private
    /// (0600, created anew; phrases are often people's names) and removed at once.
    private func readModel(_ text: String, name: String) throws(PocketSphinxError) -> OpaquePointer {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("earshot-\(name)-\(UUID().uuidString).arpa").path
        let descriptor = open(file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw .callFailed(function: "creating \(file)", code: errno) }
        defer { unlink(file) }
        let written = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        do {
            try written.write(contentsOf: Data(text.utf8))
            try written.close()
        } catch {
            throw .callFailed(function: "writing the \(name) language model to \(file)", code: -1)
        }
        guard let model = ngram_model_read(config, file, NGRAM_ARPA, ps_get_logmath(decoder)) else {
            throw .callFailed(function: "ngram_model_read(\(name))", code: -1)
        }
        return model
    }

    /// An ARPA model of `phrases`: uniform unigrams over their words and `</s>`; each word followed
    /// by its successors in the phrases with half its probability mass, the rest backing off.
    static func arpa(_ phrases: [[String]]) -> String {
        var vocabulary: [String] = []
        var successors: [String: [String]] = [:]
        for phrase in phrases {
            for (index, word) in phrase.enumerated() {
                if !vocabulary.contains(word) { vocabulary.append(word) }
                if index + 1 < phrase.count, !successors[word, default: []].contains(phrase[index + 1]) {
                    successors[word, default: []].append(phrase[index + 1])
                }
            }
        }
        let unigram = 1 / Double(vocabulary.count + 1)
        func log10(_ value: Double) -> String { String(format: "%.6f", Foundation.log10(value)) }
        func backoff(_ word: String) -> String {
            let count = Double(successors[word]?.count ?? 0)
            return count == 0 ? "0.000000" : log10(0.5 / (1 - count * unigram))
        }
        let bigrams = vocabulary.flatMap { word in (successors[word] ?? []).map { (word, $0) } }
        var lines = ["\\data\\", "ngram 1=\(vocabulary.count + 2)"]
        if !bigrams.isEmpty { lines.append("ngram 2=\(bigrams.count)") }
        lines += ["", "\\1-grams:", "-99.000000 <s> 0.000000", "\(log10(unigram)) </s>"]
        lines += vocabulary.map { "\(log10(unigram)) \($0) \(backoff($0))" }
        if !bigrams.isEmpty {
            lines += ["", "\\2-grams:"]
            lines += bigrams.map { "\(log10(0.5 / Double(successors[$0.0]!.count))) \($0.0) \($0.1)" }
        }
        lines += ["", "\\end\\", ""]
        return lines.joined(separator: "\n")
    }

    /// Calls `body` with `strings` as a C array of C strings.
    private static func withCStrings<T>(_ strings: [String], _ body: (UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> T) -> T {
        var copies = strings.map { strdup($0) }
        defer { copies.forEach { free($0) } }
        return copies.withUnsafeMutableBufferPointer { body($0.baseAddress!) }
    }

    private func openUtterance() throws(PocketSphinxError) {
        guard !inUtterance else { throw .utteranceInProgress }
        // A new stream per utterance: frame counts (word times) restart at 0.
        let streamCode = ps_start_stream(decoder)
        guard streamCode >= 0 else { throw .callFailed(function: "ps_start_stream", code: streamCode) }
        let uttCode = ps_start_utt(decoder)
        guard uttCode >= 0 else { throw .callFailed(function: "ps_start_utt", code: uttCode) }
        inUtterance = true
        samplesInUtterance = 0
    }

    private func feed(_ samples: some Collection<Float>, wholeUtterance: Bool) throws(PocketSphinxError) {
        guard !samples.isEmpty else { return }
        scratch.removeAll(keepingCapacity: true)
        scratch.reserveCapacity(samples.count)
        for sample in samples { scratch.append(PocketSphinxSamples.int16(sample)) }
        let decoder = self.decoder
        let code = scratch.withUnsafeBufferPointer { ps_process_raw(decoder, $0.baseAddress, $0.count, 0, wholeUtterance ? 1 : 0) }
        guard code >= 0 else { throw .callFailed(function: "ps_process_raw", code: code) }
        samplesInUtterance += samples.count
    }

    private func closeUtterance(alternatives: Int) throws(PocketSphinxError) -> Transcription {
        inUtterance = false
        let code = ps_end_utt(decoder)
        guard code >= 0 else { throw .callFailed(function: "ps_end_utt", code: code) }
        var score: Int32 = 0
        // With -bestpath, the first ps_get_hyp after ps_end_utt runs the lattice pass that the
        // segment posteriors and ps_get_prob read.
        guard let hypothesis = ps_get_hyp(decoder, &score) else { return Transcription(text: "") }
        let words = segmentWords(withConfidence: model.options.bestPath)
        let text = words.isEmpty ? PocketSphinxWords.clean(String(cString: hypothesis)) : words.map(\.text).joined(separator: " ")
        return Transcription(
            text: text,
            words: words,
            alternatives: text.isEmpty ? [] : nBest(alternatives, excluding: text),
            confidence: utteranceConfidence(words))
    }

    /// Words of the current best hypothesis without fillers, times in seconds, confidences from
    /// the segment posteriors when asked.
    private func segmentWords(withConfidence: Bool) -> [RecognizedWord] {
        let logmath = ps_get_logmath(decoder)
        let frameSeconds = 1 / Double(frameRate)
        var words: [RecognizedWord] = []
        var segment = ps_seg_iter(decoder)
        while let current = segment {
            if let raw = ps_seg_word(current) {
                let word = String(cString: raw)
                if !PocketSphinxWords.isFiller(word) {
                    var startFrame: Int32 = 0
                    var endFrame: Int32 = 0
                    ps_seg_frames(current, &startFrame, &endFrame)
                    var confidence: Double?
                    if withConfidence {
                        var acoustic: Int32 = 0
                        var language: Int32 = 0
                        var backoff: Int32 = 0
                        let posterior = logmath_exp(logmath, ps_seg_prob(current, &acoustic, &language, &backoff))
                        confidence = Self.unit(posterior)
                    }
                    words.append(RecognizedWord(
                        text: PocketSphinxWords.baseWord(word),
                        start: Double(startFrame) * frameSeconds,
                        // End frames are inclusive.
                        end: Double(max(endFrame, startFrame) + 1) * frameSeconds,
                        confidence: confidence))
                }
            }
            segment = ps_seg_next(current) // frees the iterator at the end
        }
        return words
    }

    private func utteranceConfidence(_ words: [RecognizedWord]) -> Double? {
        guard model.options.bestPath, !words.isEmpty else { return nil }
        switch model.options.utteranceConfidence {
        case .meanWordPosterior:
            let confidences = words.compactMap(\.confidence)
            return confidences.isEmpty ? nil : confidences.reduce(0, +) / Double(confidences.count)
        case .pathPosterior:
            return Self.unit(logmath_exp(ps_get_logmath(decoder), ps_get_prob(decoder)))
        }
    }

    /// Up to `count` distinct n-best texts other than `best`. The A* list repeats texts that
    /// differ only in fillers or pronunciation variants, and its first entry need not be the
    /// best-path text, so entries are cleaned and de-duplicated.
    private func nBest(_ count: Int, excluding best: String) -> [String] {
        guard count > 0, var iterator = ps_nbest(decoder) else { return [] }
        var seen: Set<String> = [best]
        var texts: [String] = []
        var examined = 0
        while true {
            examined += 1
            var score: Int32 = 0
            if let raw = ps_nbest_hyp(iterator, &score) {
                let text = PocketSphinxWords.clean(String(cString: raw))
                if !text.isEmpty, seen.insert(text).inserted { texts.append(text) }
            }
            if texts.count >= count || examined >= model.options.nBestSearchLimit {
                ps_nbest_free(iterator)
                break
            }
            guard let next = ps_nbest_next(iterator) else { break } // freed at the end
            iterator = next
        }
        return texts
    }

    private func lookUp(_ word: String) -> String? {
        guard let phones = ps_lookup_word(decoder, word) else { return nil }
        defer { ckd_free(phones) }
        return String(cString: phones)
    }

    /// Pronunciations the dictionary has for `word`: `word`, `word(2)`, `word(3)`, …
    private func knownPronunciations(of word: String) -> [String] {
        var pronunciations: [String] = []
        while let phones = lookUp(pronunciations.isEmpty ? word : "\(word)(\(pronunciations.count + 1))") {
            pronunciations.append(phones.split(whereSeparator: \.isWhitespace).joined(separator: " "))
        }
        return pronunciations
    }

    private func checkWord(_ word: String) throws(PocketSphinxError) {
        if word.isEmpty { throw .invalidWord(word, reason: "empty") }
        if word.contains(where: { $0.isWhitespace || $0.unicodeScalars.contains { $0.properties.generalCategory == .control } }) {
            throw .invalidWord(word, reason: "contains whitespace or control characters")
        }
        if word.contains("(") || word.contains(")") { throw .invalidWord(word, reason: "parentheses are reserved for pronunciation variants") }
        if PocketSphinxWords.isFiller(word) { throw .invalidWord(word, reason: "shaped like a filler word") }
    }

    /// Phones single-spaced and, when the model's phone set is known, checked against it
    /// (upper-cased if only that matches). An empty pronunciation would crash PocketSphinx.
    private func normalizedPhones(_ phones: String, word: String) throws(PocketSphinxError) -> String {
        let names = phones.split(whereSeparator: \.isWhitespace).map(String.init)
        guard !names.isEmpty else { throw .invalidPronunciation(word: word, phones: phones, reason: "no phones") }
        guard let known = model.phones else { return names.joined(separator: " ") }
        var normalized: [String] = []
        for name in names {
            if known.contains(name) {
                normalized.append(name)
            } else if known.contains(name.uppercased()) {
                normalized.append(name.uppercased())
            } else {
                throw .invalidPronunciation(word: word, phones: phones, reason: "unknown phone \"\(name)\"")
            }
        }
        return normalized.joined(separator: " ")
    }

    private static func unit(_ value: Double) -> Double {
        value.isNaN ? 0 : min(1, max(0, value))
    }
}
