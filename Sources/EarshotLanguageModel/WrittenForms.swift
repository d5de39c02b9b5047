/// How a custom language model's phrases were written, for the words dictation recognizes: a
/// recognized run of words that spells one of the model's phrases ("knight to queen bishop three")
/// is given back as the phrase wrote it ("knight to queen bishop 3"; "Play the Albin counter
/// gambit"), each written word keeping the time span of the words it was spelled as. Words outside
/// a phrase are left as recognized.
public struct WrittenForms: Sendable, Hashable {
    /// One written word of a phrase and how many recognized words spell it.
    struct Token: Sendable, Hashable {
        var text: String
        var words: Int
    }

    /// Spelled phrase (words joined by spaces) → its written words; only phrases written otherwise.
    private var forms: [String: [Token]] = [:]
    private var longest = 0

    /// Whether no phrase is written other than it is spelled.
    public var isEmpty: Bool { forms.isEmpty }

    /// Records `phrase` (the first spelling of a phrase wins).
    mutating func add(_ phrase: String) {
        var tokens: [Token] = [], spelled: [String] = []
        for written in phrase.split(whereSeparator: \.isWhitespace) {
            let words = LanguageModelCompiler.words(of: String(written))
            guard !words.isEmpty else { continue }
            tokens.append(Token(text: String(written), words: words.count))
            spelled += words
        }
        guard tokens.count != spelled.count || zip(tokens, spelled).contains(where: { $0.text != $1 }) else { return }
        let key = spelled.joined(separator: " ")
        guard forms[key] == nil else { return }
        forms[key] = tokens
        longest = max(longest, spelled.count)
    }

    /// `words` as written: each output word with the range of `words` it stands for. Runs that
    /// spell a phrase are matched longest first, left to right.
    public func rewrite(_ words: [String]) -> [(text: String, range: Range<Int>)] {
        var output: [(text: String, range: Range<Int>)] = []
        var start = 0
        while start < words.count {
            var matched = false
            for end in stride(from: min(words.count, start + longest), to: start, by: -1) {
                guard let tokens = forms[words[start..<end].joined(separator: " ").lowercased()] else { continue }
                var position = start
                for token in tokens {
                    output.append((token.text, position..<(position + token.words)))
                    position += token.words
                }
                start = end
                matched = true
                break
            }
            if !matched {
                output.append((words[start], start..<(start + 1)))
                start += 1
            }
        }
        return output
    }
}
