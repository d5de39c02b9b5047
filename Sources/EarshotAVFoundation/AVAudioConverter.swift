import EarshotAudio
import Foundation

/// Packets an input block is asked for (AVFoundation's `AVAudioPacketCount`; frames for PCM).
public typealias AVAudioPacketCount = UInt32

/// What an input block reports (AVFoundation's `AVAudioConverterInputStatus`).
public enum AVAudioConverterInputStatus: Sendable {
    /// The returned buffer holds input.
    case haveData
    /// No input now; ask again later.
    case noDataNow
    /// The input has ended.
    case endOfStream
}

/// What a pull conversion produced (AVFoundation's `AVAudioConverterOutputStatus`).
public enum AVAudioConverterOutputStatus: Sendable {
    /// The output buffer holds converted audio (full, or the last of the stream).
    case haveData
    /// The input block had no data now; the output holds what could be converted.
    case inputRanDry
    /// The stream has ended; nothing was returned.
    case endOfStream
    /// Conversion failed; see the error.
    case error
}

/// Supplies input to ``AVAudioConverter/convert(to:error:withInputFrom:)``.
public typealias AVAudioConverterInputBlock = (AVAudioPacketCount, UnsafeMutablePointer<AVAudioConverterInputStatus>) -> AVAudioBuffer?

/// Converts PCM between formats (AVFoundation's `AVAudioConverter`): sample format, layout,
/// channels (downmix to mono, mono to N, or the same count) and rate (libsoxr, high quality,
/// streaming). Blocking work: run it off the cooperative pool. Like AVFoundation's, not for
/// concurrent use.
public final class AVAudioConverter {
    public let inputFormat: AVAudioFormat
    public let outputFormat: AVAudioFormat
    private var resampler: Resampler?
    /// Converted frames (interleaved) not yet handed out by a pull conversion.
    private var pending: [Float] = []
    private var ended = false

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
        pending = []
        ended = false
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

    /// Fills `outputBuffer` with converted audio, pulling input from `inputBlock` as needed (the
    /// form AVFoundation uses for rate conversion). Each buffer the block returns is consumed
    /// whole: return a buffer once, then `.noDataNow` (or `.endOfStream` at the end).
    public func convert(to outputBuffer: AVAudioBuffer, error outError: UnsafeMutablePointer<NSError?>?,
                        withInputFrom inputBlock: AVAudioConverterInputBlock) -> AVAudioConverterOutputStatus {
        guard let output = outputBuffer as? AVAudioPCMBuffer, output.format == outputFormat else {
            outError?.pointee = NSError(domain: "EarshotAVFoundation", code: 1, userInfo: [NSLocalizedDescriptionKey: "the output buffer is not in the converter's output format"])
            return .error
        }
        let channels = Int(outputFormat.channelCount), capacity = Int(output.frameCapacity)
        var ranDry = false
        do {
            while pending.count < capacity * channels, !ended, !ranDry {
                var status = AVAudioConverterInputStatus.haveData
                let wanted = AVAudioPacketCount(max(1, Double(capacity - pending.count / channels) * inputFormat.sampleRate / outputFormat.sampleRate))
                let input = inputBlock(wanted, &status)
                switch status {
                case .haveData:
                    guard let pcm = input as? AVAudioPCMBuffer, pcm.format == inputFormat else {
                        throw AudioError.unsupportedFormat("the input block returned a buffer not in the converter's input format")
                    }
                    pending += try process(pcm.interleavedSamples)
                case .noDataNow:
                    ranDry = true
                case .endOfStream:
                    pending += try drain()
                    ended = true
                }
            }
        } catch {
            outError?.pointee = NSError(domain: "EarshotAVFoundation", code: 2, userInfo: [NSLocalizedDescriptionKey: "\(error)"])
            return .error
        }
        let frames = min(capacity, pending.count / channels)
        output.fill(interleavedSamples: Array(pending.prefix(frames * channels)))
        pending.removeFirst(frames * channels)
        if frames == capacity { return .haveData }
        if ended { return frames > 0 ? .haveData : .endOfStream }
        return .inputRanDry
    }

    /// Converts the next interleaved chunk of the stream to interleaved output samples (libsoxr may
    /// hold some back until ``drain()``).
    package func process(_ interleaved: [Float]) throws(AudioError) -> [Float] {
        let mapped = mapChannels(interleaved)
        return try resampler?.process(mapped) ?? mapped
    }

    /// What the resampler still holds at the end of the stream; the converter then starts afresh.
    package func drain() throws(AudioError) -> [Float] {
        defer { resampler = try? makeResampler() }
        return try resampler?.flush() ?? []
    }

    private func mapChannels(_ interleaved: [Float]) -> [Float] {
        let (from, to) = (Int(inputFormat.channelCount), Int(outputFormat.channelCount))
        if from == to { return interleaved }
        if to == 1 { return PCM.downmix(interleaved, channels: from) }
        return interleaved.flatMap { repeatElement($0, count: to) }
    }
}
