import EarshotAudio

/// Converts PCM between formats (AVFoundation's `AVAudioConverter`): sample format, layout,
/// channels (downmix to mono, mono to N, or the same count) and rate (libsoxr, high quality,
/// streaming). Blocking work: run it off the cooperative pool. Like AVFoundation's, not for
/// concurrent use.
public final class AVAudioConverter {
    public let inputFormat: AVAudioFormat
    public let outputFormat: AVAudioFormat
    private var resampler: Resampler?

    /// nil when the channels cannot be mapped (only N → 1, 1 → N and N → N are) or a rate is
    /// outside ``AudioLimits`` while they differ.
    public init?(from fromFormat: AVAudioFormat, to toFormat: AVAudioFormat) {
        let (from, to) = (fromFormat.channelCount, toFormat.channelCount)
        guard from == to || from == 1 || to == 1 else { return nil }
        inputFormat = fromFormat
        outputFormat = toFormat
        do { resampler = try makeResampler() } catch { return nil }
    }

    /// Forgets buffered audio, as at the start of a new stream.
    public func reset() {
        resampler = try? makeResampler()
    }

    private func makeResampler() throws(AudioError) -> Resampler? {
        let (from, to) = (inputFormat.sampleRate, outputFormat.sampleRate)
        guard from != to else { return nil }
        guard from.rounded() == from, to.rounded() == to, from <= Double(Int32.max), to <= Double(Int32.max) else {
            throw .unsupportedFormat("resampling needs whole sample rates, not \(from) → \(to) Hz")
        }
        return try Resampler(from: Int(from), to: Int(to), channels: Int(outputFormat.channelCount))
    }

    /// Converts `inputBuffer` into `outputBuffer` without a rate change (as AVFoundation's, which
    /// also refuses rate changes here); throws ``AudioError`` when the rates differ or the output
    /// is too small.
    public func convert(to outputBuffer: AVAudioPCMBuffer, from inputBuffer: AVAudioPCMBuffer) throws(AudioError) {
        guard inputFormat.sampleRate == outputFormat.sampleRate else {
            throw .unsupportedFormat("convert(to:from:) cannot change the rate (\(inputFormat.sampleRate) → \(outputFormat.sampleRate) Hz); use AnalyzerInputConverter")
        }
        guard outputBuffer.frameCapacity >= inputBuffer.frameLength else {
            throw .unsupportedFormat("the output buffer holds \(outputBuffer.frameCapacity) frames, the input has \(inputBuffer.frameLength)")
        }
        outputBuffer.fill(interleavedSamples: try process(inputBuffer.interleavedSamples))
    }

    /// Converts the next interleaved chunk of the stream to interleaved output samples (libsoxr may
    /// hold some back until ``drain()``).
    package func process(_ interleaved: [Float]) throws(AudioError) -> [Float] {
        let mapped = mapChannels(interleaved)
        return try resampler?.process(mapped) ?? mapped
    }

    /// What the resampler still holds at the end of the stream; the converter then starts afresh.
    package func drain() throws(AudioError) -> [Float] {
        defer { reset() }
        return try resampler?.flush() ?? []
    }

    private func mapChannels(_ interleaved: [Float]) -> [Float] {
        let (from, to) = (Int(inputFormat.channelCount), Int(outputFormat.channelCount))
        if from == to { return interleaved }
        if to == 1 { return PCM.downmix(interleaved, channels: from) }
        return interleaved.flatMap { repeatElement($0, count: to) }
    }
}
