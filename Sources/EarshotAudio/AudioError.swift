/// Why audio could not be read or converted.
public enum AudioError: Error, Sendable, Hashable, CustomStringConvertible {
    /// libsndfile could not open or decode the file.
    case unreadable(path: String, reason: String)
    /// The format is not one this path accepts (e.g. PCM width 3).
    case unsupportedFormat(String)
    /// libsoxr refused the conversion.
    case resampling(String)

    public var description: String {
        switch self {
        case .unreadable(let path, let reason): "cannot read audio from \(path): \(reason)"
        case .unsupportedFormat(let what): "unsupported audio format: \(what)"
        case .resampling(let why): "resampling failed: \(why)"
        }
    }
}
