import CSoxr
import EarshotSystem

/// Streaming sample-rate conversion with libsoxr (high quality), interleaved Float32 in and out.
/// Feed chunks with ``process(_:into:)``, then ``flush(into:)`` once at the end of the stream.
///
/// Memory is bounded by output blocks: libsoxr writes into one buffer of ``blockFrames`` frames,
/// handed to the caller as it fills, however large the input chunk. Both rates must lie in
/// ``AudioLimits/sampleRates``, so the ratio (and with it the output of one chunk) is bounded
/// too. Blocking: call it on a dedicated thread.
public final class Resampler {
    public let inputRate: Int
    public let outputRate: Int
    public let channels: Int
    /// Largest output block, in frames.
    public static let blockFrames = 16384
    private let soxr: soxr_t?

    public init(from inputRate: Int, to outputRate: Int, channels: Int) throws(AudioError) {
        try AudioLimits.check(rate: inputRate, channels: channels)
        try AudioLimits.check(rate: outputRate, channels: channels)
        self.inputRate = inputRate
        self.outputRate = outputRate
        self.channels = channels
        var error: soxr_error_t?
        var io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I)
        var quality = soxr_quality_spec(UInt(SOXR_HQ), 0)
        let made = soxr_create(Double(inputRate), Double(outputRate), UInt32(channels), &error, &io, &quality, nil)
        if let error { throw .resampling(String(cString: error)) }
        soxr = made
        LiveObjects.created("Resampler")
    }

    deinit {
        LiveObjects.destroyed("Resampler")
        soxr_delete(soxr)
    }

    /// Converts the next chunk (whole frames), handing the output to `body` in blocks of at most
    /// ``blockFrames`` frames (libsoxr buffers, so a chunk may yield less than its share).
    public func process(_ input: [Float], into body: ([Float]) throws -> Void) throws {
        try run(input, last: false, body)
    }

    /// Hands what libsoxr still holds at the end of the stream to `body`, in blocks.
    public func flush(into body: ([Float]) throws -> Void) throws {
        try run([], last: true, body)
    }

    /// Converts the next chunk; the output is at most about `input.count` × the rate ratio.
    public func process(_ input: [Float]) throws(AudioError) -> [Float] {
        try collect { try process(input, into: $0) }
    }

    /// Returns what libsoxr still holds at the end of the stream.
    public func flush() throws(AudioError) -> [Float] {
        try collect { try flush(into: $0) }
    }

    private func collect(_ produce: (([Float]) throws -> Void) throws -> Void) throws(AudioError) -> [Float] {
        var output: [Float] = []
        do {
            try produce { output += $0 }
        } catch let error as AudioError {
            throw error
        } catch {
            throw .resampling("\(error)")
        }
        return output
    }

    private func run(_ input: [Float], last: Bool, _ body: ([Float]) throws -> Void) throws {
        let inFrames = input.count / channels
        var block = [Float](repeating: 0, count: Self.blockFrames * channels)
        var consumed = 0
        while true {
            var used = 0
            var done = 0
            let error: soxr_error_t? = input.withUnsafeBufferPointer { inBuf in
                block.withUnsafeMutableBufferPointer { outBuf in
                    // At the end of the stream a nil input tells libsoxr to drain.
                    let start = last ? nil : inBuf.baseAddress.map { $0 + consumed * channels }
                    return soxr_process(soxr, start, last ? 0 : inFrames - consumed, &used, outBuf.baseAddress, Self.blockFrames, &done)
                }
            }
            if let error { throw AudioError.resampling(String(cString: error)) }
            if !last, used == 0, done == 0, consumed < inFrames { throw AudioError.resampling("libsoxr consumed no input") }
            consumed += used
            if done > 0 { try body(Array(block.prefix(done * channels))) }
            // Done once the input is consumed and libsoxr no longer fills a whole block; when
            // draining, once it has nothing left.
            if last ? done == 0 : (consumed >= inFrames && done < Self.blockFrames) { return }
        }
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
        try floats(fromLittleEndian: bytes[...], width: width)
    }

    /// ``floats(fromLittleEndian:width:)`` of part of a buffer (a frame's payload), without copying it.
    public static func floats(fromLittleEndian bytes: ArraySlice<UInt8>, width: Int) throws(AudioError) -> [Float] {
        guard width > 0, bytes.count % width == 0 else { throw .unsupportedFormat("\(bytes.count) bytes is not a whole number of \(width)-byte samples") }
        let base = bytes.startIndex
        switch width {
        case 1:
            return bytes.map { (Float($0) - 128) / 128 }
        case 2:
            return stride(from: base, to: bytes.endIndex, by: 2).map { Float(Int16(bitPattern: UInt16(bytes[$0]) | UInt16(bytes[$0 + 1]) << 8)) / 32768 }
        case 4:
            return stride(from: base, to: bytes.endIndex, by: 4).map { i in
                let v = UInt32(bytes[i]) | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2]) << 16 | UInt32(bytes[i + 3]) << 24
                return Float(Int32(bitPattern: v)) / 2_147_483_648
            }
        default:
            throw .unsupportedFormat("sample width \(width) bytes")
        }
    }
}
