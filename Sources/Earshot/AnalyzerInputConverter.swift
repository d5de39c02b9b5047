import EarshotAudio
import EarshotWire

/// Converts PCM buffers of any format within ``AudioLimits`` to the analyzer's format (Apple's
/// `AnalyzerInputConverter`): sample format, channels and rate (libsoxr). ``convert(_:at:)`` may
/// return zero, one or several inputs; ``flush()`` returns the tail the resampler still holds —
/// call it at the end of the audio or the last fraction of a second is lost. Synchronous and
/// blocking: call it from a task or thread of your own, not in a tight loop on the main actor.
public final class AnalyzerInputConverter: @unchecked Sendable {
    /// The format every input it returns has.
    public let analyzerFormat: AVAudioFormat
    private let configurationHandler: ((AVAudioConverter) -> Void)?
    // Guards the state below: calls may come from any thread, one at a time or not.
    private let lock = NSLock()
    private var converter: AVAudioConverter?
    /// The input frame (at the input rate) that continues the stream without a gap, once the
    /// caller has given times.
    private var nextInputFrame: AVAudioFramePosition?
    /// The start time for the next input returned (after a discontinuity).
    private var pendingStart: CMTime?

    /// A converter to `analyzerFormat`; `configurationHandler` sees each underlying converter as it
    /// is made (one per input format).
    public init(analyzerFormat: AVAudioFormat, configurationHandler: ((AVAudioConverter) -> Void)? = nil) {
        self.analyzerFormat = analyzerFormat
        self.configurationHandler = configurationHandler
    }

    /// A converter to the best format for `modules`; throws ``EarshotError/noCompatibleAudioFormat``
    /// when there is none (their assets are not installed).
    public static func converter(compatibleWith modules: [any SpeechModule]) async throws -> AnalyzerInputConverter {
        guard let format = await SpeechAnalyzer.bestAvailableAudioFormat(compatibleWith: modules) else { throw EarshotError.noCompatibleAudioFormat }
        return AnalyzerInputConverter(analyzerFormat: format)
    }

    /// Converts `buffer`'s valid frames. `audioTime` places the buffer on the timeline: a time that
    /// does not continue the previous buffer starts a discontiguous stretch (the previous one's
    /// tail is flushed first and the next input carries the new start time); nil continues.
    public func convert(_ buffer: AVAudioBuffer, at audioTime: AVAudioTime?) throws(AudioError) -> [AnalyzerInput] {
        guard let pcm = buffer as? AVAudioPCMBuffer else { throw .unsupportedFormat("AnalyzerInputConverter converts PCM buffers") }
        return try convert(pcm.interleavedSamples, format: pcm.format, at: audioTime)
    }

    /// What the converter still holds; the next buffer starts a new stream.
    public func flush() throws(AudioError) -> [AnalyzerInput] {
        lock.lock()
        defer { lock.unlock() }
        nextInputFrame = nil
        return try drain()
    }

    /// ``convert(_:at:)`` of interleaved Float32 samples in `format`.
    func convert(_ samples: [Float], format: AVAudioFormat, at audioTime: AVAudioTime?) throws(AudioError) -> [AnalyzerInput] {
        lock.lock()
        defer { lock.unlock() }
        var inputs: [AnalyzerInput] = []
        if converter?.inputFormat != format {
            inputs += try drain()
            converter = try makeConverter(from: format)
            nextInputFrame = nil
        }
        let frames = AVAudioFramePosition(samples.count / Int(format.channelCount))
        if let audioTime {
            let frame = audioTime.sampleRate == format.sampleRate ? audioTime.sampleTime
                : AVAudioFramePosition((Double(audioTime.sampleTime) * format.sampleRate / audioTime.sampleRate).rounded())
            if frame != nextInputFrame {
                inputs += try drain()
                pendingStart = Self.time(audioTime)
            }
            nextInputFrame = frame + frames
        } else if let next = nextInputFrame {
            nextInputFrame = next + frames
        }
        // The converter was made above.
        inputs += emit(try converter!.process(samples))
        return inputs
    }

    private func makeConverter(from format: AVAudioFormat) throws(AudioError) -> AVAudioConverter {
        if format.sampleRate != analyzerFormat.sampleRate, format.sampleRate.rounded() == format.sampleRate, format.sampleRate <= Double(Int32.max) {
            try AudioLimits.check(rate: Int(format.sampleRate), channels: Int(format.channelCount), what: "AnalyzerInputConverter input")
        }
        guard let made = AVAudioConverter(from: format, to: analyzerFormat) else {
            throw .unsupportedFormat("cannot convert \(format) to \(analyzerFormat)")
        }
        configurationHandler?(made)
        return made
    }

    /// The held tail of the current stream, as input.
    private func drain() throws(AudioError) -> [AnalyzerInput] {
        try emit(converter?.drain() ?? [])
    }

    private func emit(_ samples: [Float]) -> [AnalyzerInput] {
        guard !samples.isEmpty else { return [] }
        defer { pendingStart = nil }
        return [AnalyzerInput(format: analyzerFormat, samples: samples, bufferStartTime: pendingStart)]
    }

    /// `time` as media time (exact at a whole-Hz rate).
    static func time(_ time: AVAudioTime) -> CMTime {
        let rate = time.sampleRate
        if rate.rounded() == rate, rate >= 1, rate <= Double(Int32.max) { return CMTime(value: time.sampleTime, timescale: Int32(rate)) }
        return CMTime(seconds: Double(time.sampleTime) / rate, preferredTimescale: 1_000_000)
    }
}
