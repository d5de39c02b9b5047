import CFFTW
import Foundation

/// Whisper's log-mel spectrogram, as OpenAI's `log_mel_spectrogram` defines it: 16 kHz audio,
/// periodic Hann window of 400 samples, hop 160, centred frames (reflect padding), power spectrum
/// through Slaney-normalised mel filters (librosa's `filters.mel`), log10 clamped at 1e-10 and at
/// 8 below the maximum, then (x + 4) / 4. The FFT is FFTW's (single precision).
struct LogMel: Sendable {
    static let sampleRate = 16000
    static let fftSize = 400
    static let hop = 160
    static let bins = fftSize / 2 + 1

    let mels: Int
    /// Each filter's first FFT bin and weights (the rest of its row is zero).
    private let filters: [(first: Int, weights: [Float])]
    private let window: [Float]

    init(mels: Int) {
        self.mels = mels
        filters = Self.slaneyFilters(mels: mels)
        window = (0..<Self.fftSize).map { Float(0.5 - 0.5 * cos(2 * Double.pi * Double($0) / Double(Self.fftSize))) }
    }

    /// Frames of `samples` (count / 160 of them), `mels` values each, frame-major, normalised over
    /// these frames only.
    func features(_ samples: [Float]) -> (values: [Float], frames: Int) {
        let frames = samples.count / Self.hop
        guard frames > 0 else { return ([], 0) }
        let padded = Self.reflectPadded(samples, by: Self.fftSize / 2)
        var power = [Float](repeating: 0, count: Self.bins)
        var values = [Float](repeating: 0, count: frames * mels)
        FFT.withTransform { input, output, execute in
            for frame in 0..<frames {
                let start = frame * Self.hop
                for index in 0..<Self.fftSize { input[index] = padded[start + index] * window[index] }
                execute()
                for bin in 0..<Self.bins {
                    let re = output[bin].0, im = output[bin].1
                    power[bin] = re * re + im * im
                }
                for (mel, filter) in filters.enumerated() {
                    var sum: Float = 0
                    for (offset, weight) in filter.weights.enumerated() { sum += weight * power[filter.first + offset] }
                    values[frame * mels + mel] = log10(max(sum, 1e-10))
                }
            }
        }
        let floor = (values.max() ?? 0) - 8
        for index in values.indices { values[index] = (max(values[index], floor) + 4) / 4 }
        return (values, frames)
    }

    /// `samples` with `count` samples mirrored at each end (numpy's "reflect": the edge sample is
    /// not repeated); short input repeats the reflection as torch does.
    static func reflectPadded(_ samples: [Float], by count: Int) -> [Float] {
        let n = samples.count
        func at(_ index: Int) -> Float {
            guard n > 1 else { return samples.first ?? 0 }
            let period = 2 * (n - 1)
            var folded = index % period
            if folded < 0 { folded += period }
            return samples[folded < n ? folded : period - folded]
        }
        return (-count..<(n + count)).map(at)
    }

    /// librosa's `filters.mel(sr=16000, n_fft=400, n_mels:, htk=False, norm="slaney")`.
    static func slaneyFilters(mels: Int) -> [(first: Int, weights: [Float])] {
        let linearStep = 200.0 / 3, logStart = 1000.0, logStartMel = logStart / linearStep, logStep = log(6.4) / 27
        func mel(_ hz: Double) -> Double { hz < logStart ? hz / linearStep : logStartMel + log(hz / logStart) / logStep }
        func hz(_ mel: Double) -> Double { mel < logStartMel ? mel * linearStep : logStart * exp(logStep * (mel - logStartMel)) }
        let top = mel(Double(sampleRate) / 2)
        let points = (0..<(mels + 2)).map { hz(top * Double($0) / Double(mels + 1)) }
        let frequencies = (0..<bins).map { Double($0) * Double(sampleRate) / Double(fftSize) }
        return (0..<mels).map { index in
            let lower = points[index], centre = points[index + 1], upper = points[index + 2]
            let norm = 2 / (upper - lower)
            let row = frequencies.map { f in max(0, min((f - lower) / (centre - lower), (upper - f) / (upper - centre))) * norm }
            let first = row.firstIndex { $0 > 0 } ?? 0
            let last = row.lastIndex { $0 > 0 } ?? first
            return (first, row[first...last].map(Float.init))
        }
    }
}

/// FFTW's real-to-complex transform of `LogMel.fftSize` points: one plan for the process (FFTW's
/// planner is not thread-safe), executed on each caller's own aligned arrays (which is).
private enum FFT {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var shared: fftwf_plan?

    static func withTransform(_ body: (UnsafeMutablePointer<Float>, UnsafeMutablePointer<(Float, Float)>, () -> Void) -> Void) {
        let input = fftwf_alloc_real(LogMel.fftSize)!
        let output = fftwf_alloc_complex(LogMel.bins)!
        defer {
            fftwf_free(input)
            fftwf_free(output)
        }
        let plan: fftwf_plan = lock.withLock {
            if let shared { return shared }
            let made = fftwf_plan_dft_r2c_1d(Int32(LogMel.fftSize), input, output, UInt32(FFTW_ESTIMATE))!
            shared = made
            return made
        }
        body(input, output) { fftwf_execute_dft_r2c(plan, input, output) }
    }
}
