/// Converts interleaved little-endian integer PCM in any format within ``AudioLimits`` to mono
/// Float32 at one output rate (16 kHz for the analyzer): samples → floats, downmix, resample.
///
/// Work and memory are bounded by blocks: ``convert(_:into:)`` takes at most ``blockFrames``
/// input frames at a time and hands each converted block to the caller, so a large chunk never
/// turns into one large allocation. Blocking: run it on a dedicated thread or queue.
public final class PCMConverter {
    public let rate: Int
    public let width: Int
    public let channels: Int
    public let outputRate: Int
    /// Bytes per interleaved frame (width × channels).
    public let frameBytes: Int
    /// Input frames converted per block.
    public static let blockFrames = 16384
    private let resampler: Resampler?

    /// Fails with ``AudioError/unsupportedFormat(_:)`` outside ``AudioLimits``.
    public init(rate: Int, width: Int, channels: Int, outputRate: Int = 16000) throws(AudioError) {
        try AudioLimits.check(rate: rate, channels: channels, width: width)
        self.rate = rate
        self.width = width
        self.channels = channels
        self.outputRate = outputRate
        frameBytes = width * channels
        resampler = rate == outputRate ? nil : try Resampler(from: rate, to: outputRate, channels: 1)
    }

    /// Whether input already is mono s16le at the output rate (nothing to convert).
    public var isPassThrough: Bool { rate == outputRate && width == 2 && channels == 1 }

    /// Fails unless `byteCount` is a whole number of frames.
    public func checkWholeFrames(_ byteCount: Int) throws(AudioError) {
        guard byteCount % frameBytes == 0 else {
            let channelWord = channels == 1 ? "channel" : "channels"
            throw .unsupportedFormat("\(byteCount) bytes is not a whole number of \(frameBytes)-byte frames (\(width)-byte samples × \(channels) \(channelWord))")
        }
    }

    /// Converts `bytes` (whole frames), handing mono output to `body` a block at a time (at most
    /// about ``blockFrames`` × the rate ratio samples each).
    public func convert(_ bytes: ArraySlice<UInt8>, into body: ([Float]) throws -> Void) throws {
        try checkWholeFrames(bytes.count)
        var offset = bytes.startIndex
        while offset < bytes.endIndex {
            let end = min(offset + Self.blockFrames * frameBytes, bytes.endIndex)
            let mono = PCM.downmix(try PCM.floats(fromLittleEndian: bytes[offset..<end], width: width), channels: channels)
            if let resampler { try resampler.process(mono, into: body) } else { try body(mono) }
            offset = end
        }
    }

    /// Hands what the resampler still holds at the end of the stream to `body`.
    public func flush(into body: ([Float]) throws -> Void) throws {
        try resampler?.flush(into: body)
    }
}
