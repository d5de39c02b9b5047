/// The PCM formats Earshot accepts for conversion — Wyoming `audio-start`/`audio-chunk`, files and
/// `--live` input of the `earshot` CLI — documented in `Docs/PROTOCOL.md` (Wyoming ASR) and
/// `Docs/ARCHITECTURE.md` (audio input limits).
///
/// The rate range bounds every conversion ratio (16 kHz output: at most ×2 up, ÷24 down), so no
/// input makes a conversion allocate more than a small multiple of what it was given.
public enum AudioLimits {
    /// Sample rates, in Hz: telephone speech (8 kHz) up to 384 kHz studio audio.
    public static let sampleRates: ClosedRange<Int> = 8000...384_000
    /// Interleaved channels (downmixed to mono).
    public static let channels: ClosedRange<Int> = 1...8
    /// Integer PCM sample widths in bytes: 1 (unsigned 8-bit), 2 (s16le), 4 (s32le).
    public static let sampleWidths: Set<Int> = [1, 2, 4]

    /// Throws ``AudioError/unsupportedFormat(_:)`` naming the accepted range when `rate`, `channels`
    /// or (if given) `width` are outside it. `what` prefixes the message (e.g. a file name).
    public static func check(rate: Int, channels: Int, width: Int? = nil, what: String? = nil) throws(AudioError) {
        let prefix = what.map { "\($0): " } ?? ""
        guard sampleRates.contains(rate) else {
            throw .unsupportedFormat("\(prefix)sample rate \(rate) Hz is outside the supported \(sampleRates.lowerBound)…\(sampleRates.upperBound) Hz")
        }
        guard self.channels.contains(channels) else {
            throw .unsupportedFormat("\(prefix)\(channels) channels; \(self.channels.lowerBound)…\(self.channels.upperBound) are supported")
        }
        if let width, !sampleWidths.contains(width) {
            throw .unsupportedFormat("\(prefix)sample width \(width) bytes; 1 (unsigned 8-bit), 2 (s16le) and 4 (s32le) are supported")
        }
    }
}
