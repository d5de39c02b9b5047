import CSoxr

/// Streaming sample-rate conversion with libsoxr (high quality), interleaved Float32 in and out.
/// Feed chunks with ``process(_:)``, then ``flush()`` once at the end of the stream.
public final class Resampler {
    public let inputRate: Int
    public let outputRate: Int
    public let channels: Int
    private let soxr: soxr_t?

    public init(from inputRate: Int, to outputRate: Int, channels: Int) throws(AudioError) {
        guard inputRate > 0, outputRate > 0, channels > 0 else {
            throw .unsupportedFormat("\(channels) channels from \(inputRate) Hz to \(outputRate) Hz")
        }
        self.inputRate = inputRate
        self.outputRate = outputRate
        self.channels = channels
        var error: soxr_error_t?
        var io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I)
        var quality = soxr_quality_spec(UInt(SOXR_HQ), 0)
        let made = soxr_create(Double(inputRate), Double(outputRate), UInt32(channels), &error, &io, &quality, nil)
        if let error { throw .resampling(String(cString: error)) }
        soxr = made
    }

    deinit { soxr_delete(soxr) }

    /// Converts the next chunk (may return fewer frames than it will eventually: libsoxr buffers).
    public func process(_ input: [Float]) throws(AudioError) -> [Float] {
        try run(input, last: false)
    }

    /// Returns what libsoxr still holds at the end of the stream.
    public func flush() throws(AudioError) -> [Float] {
        try run([], last: true)
    }

    private func run(_ input: [Float], last: Bool) throws(AudioError) -> [Float] {
        let inFrames = input.count / channels
        var output: [Float] = []
        var capacity = Int(Double(inFrames) * Double(outputRate) / Double(inputRate)) + 1024
        var consumed = 0
        repeat {
            var chunk = [Float](repeating: 0, count: capacity * channels)
            var used = 0
            var done = 0
            let error: soxr_error_t? = input.withUnsafeBufferPointer { inBuf in
                chunk.withUnsafeMutableBufferPointer { outBuf in
                    let start = inBuf.baseAddress.map { $0 + consumed * channels }
                    return soxr_process(soxr, last && inFrames - consumed == 0 ? nil : start, inFrames - consumed, &used, outBuf.baseAddress, capacity, &done)
                }
            }
            if let error { throw .resampling(String(cString: error)) }
            consumed += used
            output += chunk.prefix(done * channels)
            // Keep draining while libsoxr fills the whole buffer (at the end it may hold more).
            if done < capacity, consumed >= inFrames { break }
            capacity *= 2
        } while true
        return output
    }

    /// Converts a whole signal in one go.
    public static func convert(_ input: [Float], from inputRate: Int, to outputRate: Int, channels: Int) throws(AudioError) -> [Float] {
        if inputRate == outputRate { return input }
        let resampler = try Resampler(from: inputRate, to: outputRate, channels: channels)
        return try resampler.process(input) + resampler.flush()
    }
}

/// Sample-format helpers shared by the file and the wire paths.
public enum PCM {
    /// Interleaved frames averaged to mono.
    public static func downmix(_ interleaved: [Float], channels: Int) -> [Float] {
        guard channels > 1 else { return interleaved }
        var mono = [Float](repeating: 0, count: interleaved.count / channels)
        let scale = 1 / Float(channels)
        for frame in 0..<mono.count {
            var sum: Float = 0
            for channel in 0..<channels { sum += interleaved[frame * channels + channel] }
            mono[frame] = sum * scale
        }
        return mono
    }

    /// Little-endian integer PCM (`width` 1 = unsigned 8-bit, 2 = s16, 4 = s32) as Float32 in [-1, 1].
    public static func floats(fromLittleEndian bytes: [UInt8], width: Int) throws(AudioError) -> [Float] {
        guard bytes.count % width == 0 else { throw .unsupportedFormat("\(bytes.count) bytes is not a whole number of \(width)-byte samples") }
        switch width {
        case 1:
            return bytes.map { (Float($0) - 128) / 128 }
        case 2:
            return stride(from: 0, to: bytes.count, by: 2).map { Float(Int16(bitPattern: UInt16(bytes[$0]) | UInt16(bytes[$0 + 1]) << 8)) / 32768 }
        case 4:
            return stride(from: 0, to: bytes.count, by: 4).map { i in
                let v = UInt32(bytes[i]) | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2]) << 16 | UInt32(bytes[i + 3]) << 24
                return Float(Int32(bitPattern: v)) / 2_147_483_648
            }
        default:
            throw .unsupportedFormat("sample width \(width) bytes")
        }
    }
}
