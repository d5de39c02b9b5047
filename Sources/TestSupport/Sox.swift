/// SoX as tests and benchmarks run it. SoX dithers by default whenever it resamples or reduces
/// bit depth, from a random seed, so the same file converted twice gave different samples and a
/// decode near a decision flipped from run to run; with dither off (`-D`), a conversion is a
/// function of its input.
public enum Sox {
    /// Where Debian installs sox.
    public static let path = "/usr/bin/sox"

    /// `arguments` (files and effects) behind the global option that turns dither off.
    public static func arguments(_ arguments: [String]) -> [String] {
        ["-D"] + arguments
    }
}
