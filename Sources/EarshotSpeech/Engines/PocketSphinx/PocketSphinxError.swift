/// Why a PocketSphinx model or decoder call failed.
public enum PocketSphinxError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A model file or directory is missing or unreadable; `path` names the exact file.
    case missingModelFile(PocketSphinxModel.File, path: String)
    /// An option the model refuses (a reserved decoder argument, a malformed name).
    case invalidOption(String)
    /// `cmd_ln_parse_r` rejected the decoder arguments (unknown name or bad value).
    case configurationRejected(arguments: [String])
    /// `ps_init` failed although the files exist (corrupt or mismatched model files).
    case decoderCreationFailed(PocketSphinxModel)
    /// `startUtterance()` while an utterance is open.
    case utteranceInProgress
    /// `process`/`endUtterance` without an open utterance.
    case noUtterance
    /// A PocketSphinx call returned an error code.
    case callFailed(function: String, code: Int32)
    /// A custom-vocabulary word that cannot be added (empty, whitespace, parentheses, filler-shaped).
    case invalidWord(String, reason: String)
    /// A pronunciation naming a phone the acoustic model does not have (or no phones at all).
    case invalidPronunciation(word: String, phones: String, reason: String)

    public var description: String {
        switch self {
        case .missingModelFile(let file, let path):
            "PocketSphinx \(file.rawValue) missing or unreadable: \(path)"
        case .invalidOption(let reason):
            "invalid PocketSphinx option: \(reason)"
        case .configurationRejected(let arguments):
            "PocketSphinx rejected the decoder arguments \(arguments.joined(separator: " "))"
        case .decoderCreationFailed(let model):
            "PocketSphinx could not load the model (acoustic \(model.acousticModel), language \(model.languageModel), dictionary \(model.dictionary))"
        case .utteranceInProgress:
            "a PocketSphinx utterance is already in progress"
        case .noUtterance:
            "no PocketSphinx utterance in progress"
        case .callFailed(let function, let code):
            "\(function) failed (\(code))"
        case .invalidWord(let word, let reason):
            "cannot add word \"\(word)\": \(reason)"
        case .invalidPronunciation(let word, let phones, let reason):
            "cannot add \"\(word)\" as \"\(phones)\": \(reason)"
        }
    }
}
