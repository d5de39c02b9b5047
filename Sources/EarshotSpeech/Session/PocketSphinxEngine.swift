import EarshotLanguageModel
import EarshotWire
import Foundation

/// Builds a session's PocketSphinx decoder from an installed dictation asset.
enum PocketSphinxEngine {
    /// `files`: role → path, with roles `acoustic_model` (a file inside the acoustic model
    /// directory), `language_model` and `dictionary`. The contextual strings and the custom
    /// language model (its missing words pronounced by espeak-ng) bias the decoder from the start;
    /// the stream's ``PocketSphinxStream/unhonored`` says which words could not be used.
    static func decoder(files: [String: String], contextualStrings: [String],
                        languageModel: (model: CompiledLanguageModel, weight: Double)? = nil) throws -> PocketSphinxStream {
        guard let acousticFile = files["acoustic_model"], let lm = files["language_model"], let dictionary = files["dictionary"] else {
            throw SpeechError.incompleteAsset("the dictation asset lacks acoustic_model, language_model or dictionary")
        }
        let model = try PocketSphinxModel(acousticModel: (acousticFile as NSString).deletingLastPathComponent, languageModel: lm, dictionary: dictionary)
        let stream = PocketSphinxStream(try PocketSphinxDecoder(model: model))
        if let languageModel { try stream.setLanguageModel(languageModel.model, weight: languageModel.weight) }
        try stream.setContext(contextualStrings, applyNow: true)
        return stream
    }
}

extension PocketSphinxEngine {
    /// Approximate memory one decoder holds: the files it reads whole (the acoustic model's
    /// directory, the language model and the dictionary). Blocking (it stats files).
    static func memoryBytes(files: [String: String]) -> Int {
        let manager = FileManager.default
        func size(_ path: String) -> Int { (try? manager.attributesOfItem(atPath: path)[.size] as? Int) ?? 0 }
        var total = 0
        if let acousticFile = files["acoustic_model"] {
            let directory = (acousticFile as NSString).deletingLastPathComponent
            total += ((try? manager.contentsOfDirectory(atPath: directory)) ?? []).reduce(0) { $0 + size(directory + "/" + $1) }
        }
        for role in ["language_model", "dictionary"] { total += files[role].map(size) ?? 0 }
        return total
    }
}

/// Contextual strings made usable by one PocketSphinx decoder: phrases of dictionary words (with
/// the missing ones pronounced by espeak-ng and added), and the words that cannot be used.
struct PocketSphinxContext {
    /// Most distinct words a context may bias towards; later ones are reported, not used.
    static let maximumWords = 1000

    var phrases: [[String]] = []
    var additions: [(word: String, phones: String)] = []
    var unhonored: [(word: String, reason: String)] = []

    /// Splits `strings` into lower-cased words (punctuation around them dropped), looks each up in
    /// `decoder`'s dictionary and pronounces the missing ones (blocking: dictionary look-ups and
    /// espeak-ng). A word that cannot be used splits its phrase.
    init(_ strings: [String], decoder: PocketSphinxDecoder) {
        var known: [String: Bool] = [:]
        for string in strings {
            var phrase: [String] = []
            for token in string.split(whereSeparator: \.isWhitespace) {
                let word = Self.word(token)
                guard !word.isEmpty else { continue }
                if known[word] == nil { known[word] = usable(word, decoder: decoder, distinct: known.count) }
                if known[word] == true {
                    phrase.append(word)
                } else if !phrase.isEmpty {
                    phrases.append(phrase)
                    phrase = []
                }
            }
            if !phrase.isEmpty { phrases.append(phrase) }
        }
    }

    /// The pronunciations `model`'s words lack in `decoder`'s dictionary and in the model's own
    /// (espeak-ng's, as for contextual words), and the words that cannot be pronounced.
    static func missingPronunciations(of model: CompiledLanguageModel, decoder: PocketSphinxDecoder) -> (additions: [(word: String, phones: String)], unhonored: [(word: String, reason: String)]) {
        var context = PocketSphinxContext([], decoder: decoder)
        for word in model.words where model.pronunciations[word] == nil && decoder.pronunciation(of: word) == nil {
            if !context.usable(word, decoder: decoder, distinct: 0) { context.unhonored[context.unhonored.count - 1].reason += " (a custom language model word)" }
        }
        return (context.additions, context.unhonored)
    }

    /// Adds the pronounced words and installs the phrases (call between utterances).
    func apply(to decoder: PocketSphinxDecoder) throws {
        try decoder.setContextualPhrases(phrases, adding: additions)
    }

    fileprivate mutating func usable(_ word: String, decoder: PocketSphinxDecoder, distinct: Int) -> Bool {
        guard distinct < Self.maximumWords else {
            unhonored.append((word, "more than \(Self.maximumWords) distinct contextual words"))
            return false
        }
        if decoder.pronunciation(of: word) != nil { return true }
        switch EspeakPronouncer.phones(for: word) {
        case .success(let phones):
            if let missing = phones.split(separator: " ").first(where: { decoder.model.phones?.contains(String($0)) == false }) {
                unhonored.append((word, "no pronunciation: the acoustic model has no phone \(missing)"))
                return false
            }
            additions.append((word, phones))
            return true
        case .failure(let failure):
            unhonored.append((word, failure.description))
            return false
        }
    }

    /// `"Dashwood's,"` → `dashwood's`: lower-cased, without punctuation or symbols around it.
    static func word(_ token: Substring) -> String {
        let trimmed = token.drop { !$0.isLetter && !$0.isNumber }.reversed().drop { !$0.isLetter && !$0.isNumber }.reversed()
        return String(trimmed).lowercased()
    }
}

/// ``PocketSphinxDecoder`` as a session's streaming decoder, with its contextual strings: a new
/// context is prepared when it arrives and installed before the next utterance.
/// (Unchecked Sendable: decoding happens only on its session's queue; the pending context is
/// guarded by a lock.)
final class PocketSphinxStream: StreamingDecoding, @unchecked Sendable {
    let decoder: PocketSphinxDecoder
    private let lock = NSLock()
    private var pending: PocketSphinxContext?
    private var report: [(word: String, reason: String)] = []

    init(_ decoder: PocketSphinxDecoder) { self.decoder = decoder }

    /// The PocketSphinx stream a session's streaming decoder is or meters (nil for other engines),
    /// so contexts set mid-session reach it whether or not metrics wrap it.
    static func underlying(_ decoder: any StreamingDecoding) -> PocketSphinxStream? {
        ((decoder as? MeteredDecoder)?.decoder ?? decoder) as? PocketSphinxStream
    }

    private var languageModelReport: [(word: String, reason: String)] = []
    /// How the custom language model's phrases were written (nil: no model, or none differ).
    private var writtenForms: WrittenForms?

    /// The words of the current context and the custom language model that are not used, with why.
    var unhonored: [(word: String, reason: String)] { lock.withLock { report + languageModelReport } }

    /// Interpolates the compiled custom language model `model` at `weight` now (before the first
    /// utterance), its words the dictionary lacks pronounced by espeak-ng.
    func setLanguageModel(_ model: CompiledLanguageModel, weight: Double) throws {
        let (additions, unusable) = PocketSphinxContext.missingPronunciations(of: model, decoder: decoder)
        try decoder.setCustomLanguageModel(model, adding: additions, weight: weight)
        lock.withLock {
            languageModelReport = unusable
            writtenForms = model.writtenForms.isEmpty ? nil : model.writtenForms
        }
    }

    /// `transcription` with runs that spell a phrase of the custom language model given back as
    /// the phrase wrote them (a written word spans the times of the words it stands for).
    private func written(_ transcription: Transcription) -> Transcription {
        guard let forms = lock.withLock({ writtenForms }) else { return transcription }
        var result = transcription
        let words = transcription.words
        result.words = forms.rewrite(words.map(\.text)).map { text, range in
            let spanned = words[range]
            return RecognizedWord(text: text, start: spanned.first?.start, end: spanned.last?.end,
                                  confidence: spanned.compactMap(\.confidence).min(), tokens: spanned.flatMap(\.tokens))
        }
        if !words.isEmpty { result.text = result.words.map(\.text).joined(separator: " ") }
        result.alternatives = transcription.alternatives.map { alternative in
            forms.rewrite(alternative.split(separator: " ").map(String.init)).map(\.text).joined(separator: " ")
        }
        return result
    }

    /// Prepares `strings` (blocking: look-ups, espeak-ng) and installs them now, or before the
    /// next utterance when one may be open. Returns the words that are not used.
    @discardableResult
    func setContext(_ strings: [String], applyNow: Bool = false) throws -> [(word: String, reason: String)] {
        let context = PocketSphinxContext(strings, decoder: decoder)
        if applyNow {
            try context.apply(to: decoder)
        }
        lock.withLock {
            pending = applyNow ? nil : context
            report = context.unhonored
        }
        return context.unhonored
    }

    func startUtterance() throws {
        try applyPending()
        try decoder.startUtterance()
    }

    func process(_ samples: [Float]) throws { try decoder.process(samples) }
    func partial() -> Transcription? { decoder.partial().map(written) }
    func endUtterance(alternatives: Int) throws -> Transcription { written(try decoder.endUtterance(alternatives: alternatives)) }

    func decodeWhole(_ samples: [Float], alternatives: Int) throws -> Transcription {
        try applyPending()
        return written(try decoder.decodeUtterance(samples, alternatives: alternatives))
    }

    private func applyPending() throws {
        guard let context = lock.withLock({ defer { pending = nil }; return pending }) else { return }
        try context.apply(to: decoder)
    }
}
