/// Why a sherpa-onnx engine could not load or run.
public enum SherpaOnnxError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A model file is missing or unreadable.
    case missingFile(String)
    /// sherpa-onnx refused the configuration (it returned no object).
    case loadFailed(String)
    /// The input is longer than the engine decodes in one call; segment it first.
    case inputTooLong(seconds: Double, limit: Double)
    /// The input cannot be decoded as given (sample rate, size).
    case invalidInput(String)
    /// The engine process could not be started, or ended (crashed) while the object was loaded.
    case engineUnavailable(String)

    public var description: String {
        switch self {
        case .missingFile(let path): "model file missing or unreadable: \(path)"
        case .loadFailed(let what): "sherpa-onnx could not load \(what)"
        case .inputTooLong(let seconds, let limit):
            "audio of \((seconds * 100).rounded() / 100) s is longer than the \(limit) s one decode accepts"
        case .invalidInput(let why): "invalid input: \(why)"
        case .engineUnavailable(let why): "the speech engine process is unavailable: \(why)"
        }
    }
}
