import CPocketSphinx
import Foundation

/// Samples as PocketSphinx takes them.
enum PocketSphinxSamples {
    /// Float32 in [-1, 1] → s16, clipped; NaN becomes silence.
    static func int16(_ sample: Float) -> Int16 {
        let scaled = (sample * 32768).rounded()
        if scaled.isNaN { return 0 }
        return Int16(max(-32768, min(32767, scaled)))
    }
}
