import CPocketSphinx
import Foundation

/// A C `argv` (program name first) whose array and strings live as long as this object, as
/// `cmd_ln_parse_r` requires: the `cmd_ln_t` it returns keeps pointing into them.
final class PocketSphinxArgumentVector {
    let count: Int32
    let pointer: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>

    init(_ arguments: [String]) {
        count = Int32(arguments.count)
        pointer = .allocate(capacity: arguments.count + 1)
        for (index, argument) in arguments.enumerated() { pointer[index] = strdup(argument) }
        pointer[arguments.count] = nil
    }

    deinit {
        for index in 0..<Int(count) { free(pointer[index]) }
        pointer.deallocate()
    }
}

enum PocketSphinxLogging {
    /// Turns sphinxbase logging off for the whole process, once. Done instead of `-logfn`, whose
    /// `err_set_logfile` replaces (and closes) one process-wide `FILE *` on every `ps_init`.
    static let silenced: Void = { err_set_logfp(nil) }()
}

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

enum PocketSphinxSamples {
    /// Float32 in [-1, 1] → s16, clipped; NaN becomes silence.
    static func int16(_ sample: Float) -> Int16 {
        let scaled = (sample * 32768).rounded()
        if scaled.isNaN { return 0 }
        return Int16(max(-32768, min(32767, scaled)))
    }
}
