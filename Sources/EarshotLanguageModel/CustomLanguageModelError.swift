/// What is wrong with custom language model data.
public enum CustomLanguageModelError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Not JSON of the document's shape (what and where).
    case malformed(String)
    /// Another file format.
    case unsupportedFormat(String)
    /// A `formatVersion` this build does not read.
    case unsupportedVersion(Int)
    /// A field's value is not allowed (field, why).
    case invalid(String, String)
    /// More than a bound allows (what, the bound).
    case limitExceeded(String, limit: Int)
    /// A template names a class its group does not define (template, class).
    case undefinedClass(template: String, className: String)
    /// An X-SAMPA symbol the locale's dictation engine has no phone for (symbol, grapheme, locale).
    case unsupportedPhoneme(String, grapheme: String, locale: String)

    public var description: String {
        switch self {
        case .malformed(let what): "custom language model data is malformed: \(what)"
        case .unsupportedFormat(let format): "not custom language model data (format \"\(format)\")"
        case .unsupportedVersion(let version):
            "custom language model data of format version \(version); this Earshot reads version \(CustomLanguageModelDocument.currentVersion)"
        case .invalid(let field, let why): "custom language model data: \(field) \(why)"
        case .limitExceeded(let what, let limit): "custom language model data: \(what) past the limit of \(limit)"
        case .undefinedClass(let template, let name): "custom language model template \"\(template)\" uses class <\(name)>, which its group does not define"
        case .unsupportedPhoneme(let symbol, let grapheme, let locale):
            "X-SAMPA symbol \"\(symbol)\" in the pronunciation of \"\(grapheme)\" is not supported for \(locale) (see supportedPhonemes(locale:))"
        }
    }
}
