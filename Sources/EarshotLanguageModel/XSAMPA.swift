import Foundation

/// The X-SAMPA symbols a locale's dictation engine can say, mapped to its phone set: for English,
/// the CMU (ARPAbet) phones of the PocketSphinx US English dictionary. Stress and syllable marks
/// are accepted, alone or leading a symbol, and carry no phone (the dictionary has no stress).
public enum XSAMPA {
    /// X-SAMPA symbol → CMU phones, for English.
    static let english: [String: [String]] = [
        // Vowels and diphthongs (long marks accepted).
        "i": ["IY"], "i:": ["IY"], "I": ["IH"], "e": ["EY"], "eI": ["EY"], "E": ["EH"], "{": ["AE"],
        "a": ["AA"], "A": ["AA"], "A:": ["AA"], "Q": ["AA"], "O": ["AO"], "O:": ["AO"],
        "o": ["OW"], "oU": ["OW"], "@U": ["OW"], "U": ["UH"], "u": ["UW"], "u:": ["UW"],
        "V": ["AH"], "@": ["AH"], "3": ["ER"], "3:": ["ER"], "3`": ["ER"], "@`": ["ER"], "@r": ["ER"],
        "aI": ["AY"], "aU": ["AW"], "OI": ["OY"],
        // Consonants ("r" and "r\" both for the English r; the flap as t).
        "p": ["P"], "b": ["B"], "t": ["T"], "d": ["D"], "k": ["K"], "g": ["G"],
        "f": ["F"], "v": ["V"], "T": ["TH"], "D": ["DH"], "s": ["S"], "z": ["Z"], "S": ["SH"], "Z": ["ZH"],
        "h": ["HH"], "tS": ["CH"], "dZ": ["JH"], "m": ["M"], "n": ["N"], "N": ["NG"],
        "l": ["L"], "r": ["R"], "r\\": ["R"], "w": ["W"], "j": ["Y"], "4": ["T"],
        // Syllabic consonants.
        "l=": ["AH", "L"], "n=": ["AH", "N"], "m=": ["AH", "M"],
        // Primary and secondary stress, syllable break.
        "\"": [], "%": [], ".": [],
    ]

    /// The symbols `locale` (BCP-47) supports, sorted; none for a language without a table.
    public static func supportedSymbols(locale: String) -> [String] {
        table(for: locale)?.keys.sorted() ?? []
    }

    /// The phones of `pronunciation` (X-SAMPA symbols separated by spaces) of `grapheme` in
    /// `locale`; a symbol without a phone there is an error.
    public static func phones(of pronunciation: String, grapheme: String, locale: String) throws(CustomLanguageModelError) -> [String] {
        let table = table(for: locale) ?? [:]
        var phones: [String] = []
        for token in pronunciation.split(whereSeparator: \.isWhitespace) {
            // A stress mark may lead its syllable's first symbol ("\"{").
            let symbol = table[String(token)] != nil ? token : token.drop { $0 == "\"" || $0 == "%" }
            guard !symbol.isEmpty else { continue }
            guard let mapped = table[String(symbol)] else { throw .unsupportedPhoneme(String(symbol), grapheme: grapheme, locale: locale) }
            phones += mapped
        }
        guard !phones.isEmpty else { throw .invalid("the pronunciation of \"\(grapheme)\"", "has no phones") }
        return phones
    }

    private static func table(for locale: String) -> [String: [String]]? {
        Locale.Components(identifier: locale).languageComponents.languageCode?.identifier == "en" ? english : nil
    }
}
