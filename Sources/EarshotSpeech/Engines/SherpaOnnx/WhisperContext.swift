import Foundation

/// The bounds on contextual strings a Whisper decode takes: they join the prompt (which the model
/// takes up to 223 tokens of) and bias the search, so a session may give at most
/// ``maxPhrases`` of at most ``maxPhraseCharacters`` each; the rest are reported unhonored
/// (``EngineCapabilities``), never dropped silently.
public enum WhisperContext {
    public static let maxPhrases = 32
    public static let maxPhraseCharacters = 64
    /// Characters of all phrases together (about 150 tokens of English, leaving the rest of the
    /// prompt to the recording's earlier text).
    public static let maxTotalCharacters = 600

    /// The phrases a decode takes, in order.
    public static func honoured(_ strings: [String]) -> [String] {
        split(strings).honoured
    }

    /// The phrases a decode takes, and those past a bound with the bound they passed.
    public static func split(_ strings: [String]) -> (honoured: [String], refused: [(phrase: String, reason: String)]) {
        var honoured: [String] = []
        var refused: [(String, String)] = []
        var total = 0
        for string in strings {
            let phrase = string.trimmingCharacters(in: .whitespacesAndNewlines)
            if phrase.isEmpty { continue }
            if phrase.count > maxPhraseCharacters {
                refused.append((string, "longer than \(maxPhraseCharacters) characters (Whisper's prompt is bounded)"))
            } else if honoured.count == maxPhrases {
                refused.append((string, "more than \(maxPhrases) contextual strings"))
            } else if total + phrase.count > maxTotalCharacters {
                refused.append((string, "past \(maxTotalCharacters) characters of contextual strings (Whisper's prompt is bounded)"))
            } else if !honoured.contains(phrase) {
                honoured.append(phrase)
                total += phrase.count
            }
        }
        return (honoured, refused)
    }
}
