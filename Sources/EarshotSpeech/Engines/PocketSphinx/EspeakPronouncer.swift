import CEspeakNG
import Foundation

/// Pronunciations in the CMU (ARPAbet) phone set for English words a PocketSphinx dictionary
/// lacks: espeak-ng's letter-to-sound rules and exception lists (`espeak_TextToPhonemes`, US
/// English voice), its phoneme names mapped to CMU phones. espeak-ng keeps global state, so
/// every call runs under one process-wide lock; calls block (about a millisecond a word) and
/// belong on a dedicated thread.
enum EspeakPronouncer {
    /// Why a word got no pronunciation.
    enum Failure: Error, Equatable, CustomStringConvertible {
        /// espeak-ng (or its US English voice) could not be loaded.
        case unavailable(String)
        /// Only letters (with inner apostrophes or hyphens) are pronounced.
        case notAWord
        /// espeak-ng gave a phoneme the CMU phone set has no equivalent for.
        case unmappedPhoneme(String)

        var description: String {
            switch self {
            case .unavailable(let reason): "no pronunciation: \(reason)"
            case .notAWord: "not in the dictionary, and only words of letters get a pronunciation"
            case .unmappedPhoneme(let phoneme): "no pronunciation: espeak-ng's phoneme \"\(phoneme)\" has no CMU equivalent"
            }
        }
    }

    /// CMU phones (single-spaced, no stress) for `word`.
    static func phones(for word: String) -> Result<String, Failure> {
        guard isPronounceable(word) else { return .failure(.notAWord) }
        return lock.withLock {
            if case .failure(let failure) = voice { return .failure(failure) }
            var phones: [String] = []
            let mode = Int32(separator.asciiValue!) << 8 // ASCII names, separated
            var failure: Failure?
            word.withCString { text in
                var pointer: UnsafeRawPointer? = UnsafeRawPointer(text)
                while pointer != nil, failure == nil {
                    guard let raw = espeak_TextToPhonemes(&pointer, espeakCHARS_UTF8, mode) else { break }
                    switch cmuPhones(String(cString: raw)) {
                    case .success(let converted): phones += converted
                    case .failure(let error): failure = error
                    }
                }
            }
            if let failure { return .failure(failure) }
            return phones.isEmpty ? .failure(.notAWord) : .success(phones.joined(separator: " "))
        }
    }

    /// Letters, with apostrophes or hyphens only between them.
    static func isPronounceable(_ word: String) -> Bool {
        guard let first = word.first, let last = word.last, first.isLetter, last.isLetter else { return false }
        return word.allSatisfy { $0.isLetter || $0 == "'" || $0 == "-" }
    }

    /// espeak-ng's phonemes of one clause (`'` `,` stress marks, `;` palatalization, names
    /// separated by `_`, words by spaces) as CMU phones.
    static func cmuPhones(_ espeak: String) -> Result<[String], Failure> {
        var phones: [String] = []
        for name in espeak.split(whereSeparator: { $0 == separator || $0.isWhitespace }) {
            let phoneme = String(name.drop(while: { marks.contains($0) }))
            guard !phoneme.isEmpty else { continue }
            guard let mapped = table[phoneme] else { return .failure(.unmappedPhoneme(phoneme)) }
            phones += mapped.split(separator: " ").map(String.init)
        }
        return .success(phones)
    }

    private static let separator: Character = "_"
    /// Stress and modifier marks, which the CMU phone set does not spell.
    private static let marks: Set<Character> = ["'", ",", "%", "=", ";"]
    private static let lock = NSLock()

    /// espeak-ng set up once with its US English voice (guarded by `lock`).
    private static let voice: Result<Void, Failure> = {
        // 0x8000: return an error instead of exiting the process when espeak-ng-data is missing.
        guard espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 0, nil, 0x8000) > 0 else {
            return .failure(.unavailable("espeak-ng could not load its data"))
        }
        guard espeak_SetVoiceByName("en-us") == EE_OK else { return .failure(.unavailable("espeak-ng has no en-us voice")) }
        return .success(())
    }()

    /// espeak-ng's US English phoneme names (`phsource/ph_english_us`) → CMU phones.
    private static let table: [String: String] = [
        // Vowels and diphthongs.
        "a": "AE", "aa": "AE", "a#": "AH", "A:": "AA", "A": "AA", "A@": "AA R", "A@r": "AA R",
        "@": "AH", "@2": "AH", "@5": "AH", "@-": "AH", "@L": "AH L", "@r": "ER", "3": "ER", "3:": "ER", "3:r": "ER",
        "E": "EH", "E2": "EH", "e": "EH", "e@": "EH R", "e@r": "EH R",
        "I": "IH", "I2": "IH", "I#": "IH", "i": "IY", "i:": "IY", "i@": "IY AH", "i@3": "IH R", "i@3r": "IH R",
        "0": "AA", "O": "AO", "O:": "AO", "O@": "AO R", "O@r": "AO R", "o@": "AO R", "o@r": "AO R", "0@": "AO R",
        "V": "AH", "U": "UH", "u:": "UW", "U@": "UH R", "U@r": "UH R",
        "aI": "AY", "aI@": "AY ER", "aI3": "AY ER", "aU": "AW", "aU@": "AW ER", "eI": "EY", "OI": "OY", "oU": "OW", "@U": "OW",
        // Consonants.
        "p": "P", "b": "B", "t": "T", "t#": "T", "t2": "T", "d": "D", "d#": "D", "k": "K", "g": "G", "x": "K",
        "f": "F", "v": "V", "T": "TH", "D": "DH", "s": "S", "z": "Z", "z#": "Z", "S": "SH", "Z": "ZH",
        "h": "HH", "m": "M", "m-": "M", "n": "N", "n-": "N", "N": "NG", "l": "L", "l-": "L", "r": "R", "r-": "R",
        "w": "W", "hw": "W", "j": "Y", "tS": "CH", "dZ": "JH",
    ]
}
