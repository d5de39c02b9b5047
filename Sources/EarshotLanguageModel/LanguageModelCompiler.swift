import Foundation

/// Custom language model data compiled for an n-gram dictation engine: a trigram model of the
/// weighted phrases in ARPA form, its words, the data's pronunciations as the engine's phones, and
/// how its phrases were written. Only ``LanguageModelCompiler`` makes one: sphinxbase crashes on a
/// malformed ARPA file, so an engine takes this type, never ARPA text.
public struct CompiledLanguageModel: Sendable, Hashable {
    /// The model in ARPA text form.
    public let arpa: String
    /// The model's words (lower case, numbers spelled out), sorted.
    public let words: [String]
    /// Each pronounced word (lower case) and its phone strings (CMU phones separated by spaces).
    public let pronunciations: [String: [String]]
    /// How the phrases were written, for giving recognized words back in that form.
    public let writtenForms: WrittenForms
}

/// Compiles ``CustomLanguageModelDocument``s: every phrase (templates expanded, each expansion
/// getting an equal share of its template's count) is split into the dictionary's words (lower
/// case, punctuation dropped, numbers spelled out), and a trigram model is estimated from the
/// weighted counts with Witten-Bell smoothing (each order interpolated with the one below, the
/// unigrams with a uniform distribution), written as ARPA with back-off weights.
public enum LanguageModelCompiler {
    /// Compiles `document` (checked against `limits` first).
    public static func compile(_ document: CustomLanguageModelDocument, limits: CustomLanguageModelLimits = .standard) throws(CustomLanguageModelError) -> CompiledLanguageModel {
        try document.validate(limits)
        var counts = NGramCounts()
        var written = WrittenForms()
        for phrase in document.phrases {
            counts.add(words(of: phrase.phrase), weight: Double(phrase.count))
            written.add(phrase.phrase)
        }
        for group in document.templateGroups {
            for template in group.templates {
                let expansion = try TemplateExpansion(template.body)
                let share = Double(template.count) / Double(try expansion.expansions(classes: group.classes, limit: limits.maxExpandedPhrases))
                expansion.forEachExpansion(classes: group.classes) { phrase in
                    counts.add(words(of: phrase), weight: share)
                    written.add(phrase)
                    return true
                }
            }
        }
        guard counts.tokens > 0 else { throw .invalid("the data", "has no phrases with words") }
        var pronunciations: [String: [String]] = [:]
        for pronunciation in document.pronunciations {
            let word = pronunciation.grapheme.lowercased()
            for phonemes in pronunciation.phonemes {
                let phones = try XSAMPA.phones(of: phonemes, grapheme: pronunciation.grapheme, locale: document.locale).joined(separator: " ")
                if !pronunciations[word, default: []].contains(phones) { pronunciations[word, default: []].append(phones) }
            }
        }
        return CompiledLanguageModel(arpa: counts.arpa(), words: counts.vocabulary.sorted(), pronunciations: pronunciations, writtenForms: written)
    }

    /// A phrase's words as the dictionary spells them: lower case, split at anything but letters,
    /// digits and inner apostrophes, whole numbers spelled out ("8" → "eight", "1,000" → "one
    /// thousand"; with a leading zero, digit by digit: "007" → "zero zero seven").
    public static func words(of phrase: String) -> [String] {
        let lowered = phrase.lowercased()
        // Thousands separators only where there is a comma between digits to look for.
        let joined = lowered.contains(",") && lowered.contains(where: \.isNumber)
            ? lowered.replacingOccurrences(of: #"(?<=[0-9]),(?=[0-9]{3}(?![0-9]))"#, with: "", options: .regularExpression) : lowered
        return joined.split { !$0.isLetter && !$0.isNumber && $0 != "'" }.flatMap { token -> [String] in
            let word = String(token.drop { $0 == "'" }.reversed().drop { $0 == "'" }.reversed())
            guard !word.isEmpty, word.allSatisfy({ $0.isASCII && $0.isNumber }) else { return word.isEmpty ? [] : [word] }
            if word.count > 1 && word.hasPrefix("0") { return word.map { NumberWords.ones[Int(String($0))!] } }
            return Int(word).map(NumberWords.spell) ?? word.map { NumberWords.ones[Int(String($0))!] }
        }
    }
}

/// English cardinal numbers in words.
enum NumberWords {
    static let ones = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
                       "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
    static let tens = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]

    /// `number` (0 … 999 999 999 999) in words; digit by digit beyond.
    static func spell(_ number: Int) -> [String] {
        guard number < 1_000_000_000_000 else { return String(number).map { ones[Int(String($0))!] } }
        if number < 20 { return [ones[number]] }
        if number < 100 { return [tens[number / 10]] + (number % 10 == 0 ? [] : [ones[number % 10]]) }
        for (size, name) in [(1_000_000_000, "billion"), (1_000_000, "million"), (1_000, "thousand"), (100, "hundred")] where number >= size {
            return spell(number / size) + [name] + (number % size == 0 ? [] : spell(number % size))
        }
        return []
    }
}

/// Weighted n-gram counts of sentences (`<s>` … `</s>`), up to trigrams, and their ARPA model.
struct NGramCounts {
    private static let start = "<s>", end = "</s>"
    /// counts[n - 1][context][word]: weighted count of `word` after `context` (n - 1 words).
    private var counts: [[[String]: [String: Double]]] = [[:], [:], [:]]
    private(set) var vocabulary: Set<String> = []
    private(set) var tokens = 0.0

    mutating func add(_ words: [String], weight: Double) {
        guard !words.isEmpty else { return }
        vocabulary.formUnion(words)
        let sentence = [Self.start] + words + [Self.end]
        for index in 1..<sentence.count {
            tokens += weight
            for order in 1...3 where index - order + 1 >= 0 {
                let context = Array(sentence[(index - order + 1)..<index])
                counts[order - 1][context, default: [:]][sentence[index], default: 0] += weight
            }
        }
    }

    /// Witten-Bell estimates, interpolated: P(w|h) = (c(h,w) + T(h)·P(w|h′)) / (c(h) + T(h)),
    /// T(h) the number of distinct words seen after h, h′ the context one word shorter; the
    /// unigrams interpolate with the uniform distribution over the vocabulary and `</s>`.
    func arpa() -> String {
        let predicted = vocabulary.sorted() + [Self.end]
        let uniform = 1 / Double(predicted.count)
        let unigramCounts = counts[0][[], default: [:]]
        let unigramTotal = unigramCounts.values.reduce(0, +), unigramTypes = Double(unigramCounts.count)
        var unigram: [String: Double] = [:]
        for word in predicted {
            unigram[word] = (unigramCounts[word, default: 0] + unigramTypes * uniform) / (unigramTotal + unigramTypes)
        }
        // Explicit probabilities per order, and back-off weights per context.
        var explicit: [[[String]: [String: Double]]] = [[:], [:], [:]]
        var backoff: [[String]: Double] = [:]
        func lower(_ context: [String], _ word: String) -> Double {
            if context.isEmpty { return unigram[word] ?? 0 }
            if let probability = explicit[context.count][context]?[word] { return probability }
            return (backoff[context] ?? 1) * lower(Array(context.dropFirst()), word)
        }
        for order in 2...3 {
            for (context, followers) in counts[order - 1] {
                let total = followers.values.reduce(0, +), types = Double(followers.count)
                let shorter = Array(context.dropFirst())
                var probabilities: [String: Double] = [:]
                for (word, count) in followers {
                    probabilities[word] = (count + types * lower(shorter, word)) / (total + types)
                }
                explicit[order - 1][context] = probabilities
                let left = 1 - probabilities.values.reduce(0, +)
                let lowerLeft = 1 - probabilities.keys.reduce(0) { $0 + lower(shorter, $1) }
                backoff[context] = max(left, 1e-12) / max(lowerLeft, 1e-12)
            }
        }
        func log10(_ value: Double) -> String { String(format: "%.6f", Foundation.log10(max(value, 1e-99))) }
        func backoffColumn(_ context: [String]) -> String { backoff[context].map { " " + log10($0) } ?? "" }
        let bigrams = explicit[1].flatMap { context, words in words.map { (context + [$0.key], $0.value) } }.sorted { $0.0.lexicographicallyPrecedes($1.0) }
        let trigrams = explicit[2].flatMap { context, words in words.map { (context + [$0.key], $0.value) } }.sorted { $0.0.lexicographicallyPrecedes($1.0) }
        var lines = ["\\data\\", "ngram 1=\(predicted.count + 1)", "ngram 2=\(bigrams.count)", "ngram 3=\(trigrams.count)", "", "\\1-grams:"]
        lines.append("-99.000000 \(Self.start)" + backoffColumn([Self.start]))
        lines += predicted.map { "\(log10(unigram[$0]!)) \($0)" + backoffColumn([$0]) }
        lines += ["", "\\2-grams:"]
        lines += bigrams.map { "\(log10($0.1)) \($0.0.joined(separator: " "))" + backoffColumn($0.0) }
        lines += ["", "\\3-grams:"]
        lines += trigrams.map { "\(log10($0.1)) \($0.0.joined(separator: " "))" }
        lines += ["", "\\end\\", ""]
        return lines.joined(separator: "\n")
    }
}
