import Foundation

/// Word error rate as the fixtures README defines it: case-folded, punctuation stripped,
/// (substitutions + deletions + insertions) / reference words, by Levenshtein alignment on words.
public enum WordErrorRate {
    /// Lower-case words without punctuation (apostrophes inside words kept).
    public static func words(_ text: String) -> [String] {
        text.lowercased()
            .map { $0.isLetter || $0.isNumber || $0 == "'" ? $0 : " " }
            .split(separator: " ")
            .map { String($0).trimmingCharacters(in: CharacterSet(charactersIn: "'")) }
            .filter { !$0.isEmpty }
    }

    /// Edit distance in words between `reference` and `hypothesis`.
    public static func errors(reference: [String], hypothesis: [String]) -> Int {
        var previous = Array(0...hypothesis.count)
        for (i, ref) in reference.enumerated() {
            var current = [i + 1] + Array(repeating: 0, count: hypothesis.count)
            for (j, hyp) in hypothesis.enumerated() {
                current[j + 1] = min(previous[j + 1] + 1, current[j] + 1, previous[j] + (ref == hyp ? 0 : 1))
            }
            previous = current
        }
        return previous[hypothesis.count]
    }

    /// Total WER over pairs of (reference, hypothesis) texts.
    public static func rate(_ pairs: [(reference: String, hypothesis: String)]) -> Double {
        var errors = 0
        var total = 0
        for pair in pairs {
            let ref = words(pair.reference)
            errors += self.errors(reference: ref, hypothesis: words(pair.hypothesis))
            total += ref.count
        }
        return total == 0 ? 0 : Double(errors) / Double(total)
    }

    /// The LibriVox references of Debian's pocketsphinx-testdata: file id → text.
    public static func librivoxReferences() throws -> [String: String] {
        let text = try String(contentsOfFile: "/usr/share/pocketsphinx/test/data/librivox/transcription", encoding: .utf8)
        var references: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let open = line.lastIndex(of: "("), let close = line.lastIndex(of: ")") else { continue }
            let id = String(line[line.index(after: open)..<close])
            let words = line[..<open].replacingOccurrences(of: "<s>", with: "").replacingOccurrences(of: "</s>", with: "")
            references[id] = words.trimmingCharacters(in: .whitespaces)
        }
        return references
    }
}
