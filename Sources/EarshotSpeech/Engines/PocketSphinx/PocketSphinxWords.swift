import CPocketSphinx
import Foundation

/// Word strings as PocketSphinx spells them.
enum PocketSphinxWords {
    /// Silence, sentence markers and noise words: `<s>`, `</s>`, `<sil>`, `[NOISE]`, `++UH++`.
    static func isFiller(_ word: some StringProtocol) -> Bool {
        guard let first = word.first, let last = word.last, word.count > 1 else { return false }
        return (first == "<" && last == ">") || (first == "[" && last == "]") || (first == "+" && last == "+")
    }

    /// `the(2)` → `the` (pronunciation variants are numbered in the dictionary).
    static func baseWord(_ word: some StringProtocol) -> String {
        guard word.last == ")", let open = word.lastIndex(of: "("), open > word.startIndex else { return String(word) }
        let digits = word[word.index(after: open)..<word.index(before: word.endIndex)]
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber) else { return String(word) }
        return String(word[..<open])
    }

    /// A hypothesis string without fillers or variant numbers, single-spaced.
    static func clean(_ hypothesis: String) -> String {
        hypothesis.split(whereSeparator: \.isWhitespace).filter { !isFiller($0) }.map { baseWord($0) }.joined(separator: " ")
    }
}
