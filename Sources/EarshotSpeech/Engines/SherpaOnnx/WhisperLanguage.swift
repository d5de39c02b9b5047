import EarshotWire
import Foundation

/// Whisper's languages and their BCP-47 spelling.
///
/// Whisper names languages with its own codes (`iw` for Hebrew in Hugging Face vocabularies, `jw`
/// for Javanese); the converted models spell Hebrew `he`. Everything outside Earshot's engines uses
/// BCP-47. Every language reaches the engine through ``whisperCode(for:)``, which only returns
/// codes the model knows (the decoder refuses others with a typed error).
public enum WhisperLanguage {
    /// The 99 language codes of multilingual Whisper (tiny … large-v2), in the model's token order,
    /// as the converted models spell them.
    public static let whisperCodes: [String] = [
        "en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv", "it", "id", "hi", "fi", "vi",
        "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no", "th", "ur", "hr", "bg", "lt", "la", "mi", "ml", "cy", "sk",
        "te", "fa", "lv", "bn", "sr", "az", "sl", "kn", "et", "mk", "br", "eu", "is", "hy", "ne", "mn", "bs", "kk", "sq", "sw",
        "gl", "mr", "pa", "si", "km", "sn", "yo", "so", "af", "oc", "ka", "be", "tg", "sd", "gu", "am", "yi", "lo", "uz", "fo",
        "ht", "ps", "tk", "nn", "mt", "sa", "lb", "my", "bo", "tl", "mg", "as", "tt", "haw", "ln", "ha", "ba", "jw", "su",
    ]

    private static let known = Set(whisperCodes)
    /// Whisper spellings that differ from BCP-47.
    private static let toBCP47 = ["jw": "jv", "iw": "he"]
    private static let fromBCP47 = ["jv": "jw"]

    /// The BCP-47 language tag for a Whisper code (`jw` → `jv`, `iw` → `he`); also accepts
    /// the token spelling `<|de|>`. Nil for codes Whisper does not have.
    public static func bcp47(forWhisperCode code: String) -> String? {
        var bare = code.trimmingCharacters(in: .whitespaces)
        if bare.hasPrefix("<|"), bare.hasSuffix("|>") { bare = String(bare.dropFirst(2).dropLast(2)) }
        bare = bare.lowercased()
        guard known.contains(bare) || bare == "iw" else { return nil }
        return toBCP47[bare] ?? bare
    }

    /// The Whisper code for a BCP-47 locale's language (`de-AT` → `de`, `jv` → `jw`), or nil when
    /// Whisper does not know the language (or the locale is `und`).
    public static func whisperCode(for locale: String) -> String? {
        guard let tag = LocaleTag(locale) else { return nil }
        let code = fromBCP47[tag.language] ?? tag.language
        return known.contains(code) ? code : nil
    }

    /// Every language as a BCP-47 tag, in Whisper's order.
    public static var bcp47Tags: [String] { whisperCodes.map { toBCP47[$0] ?? $0 } }
}
