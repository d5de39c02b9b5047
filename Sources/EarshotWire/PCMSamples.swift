/// Sample encoding of the PCM payloads audio events carry.
public enum PCMSamples {
    /// Float samples in [-1, 1] as signed 16-bit little-endian bytes (clipped).
    public static func s16le(_ samples: [Float]) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(samples.count * 2)
        for sample in samples {
            let v = Int16(max(-32768, min(32767, (sample * 32768).rounded())))
            out.append(UInt8(truncatingIfNeeded: v))
            out.append(UInt8(truncatingIfNeeded: v >> 8))
        }
        return out
    }
}
