import EarshotWire
import Foundation

/// Time-coded audio for the analyzer (Apple's `AnalyzerInput`): a copy of a PCM buffer's valid
/// frames and an optional start time on the session timeline. Without a start time it follows the
/// previous input; with one, input may be discontiguous.
public struct AnalyzerInput: Sendable {
    /// The time-code of this input.
    public let bufferStartTime: CMTime?
    /// The audio format of this input.
    public let bufferFormat: AVAudioFormat
    /// Interleaved samples in [-1, 1].
    let samples: [Float]

    public init(buffer: AVAudioPCMBuffer) {
        self.init(buffer: buffer, bufferStartTime: nil)
    }

    /// Input that starts at `bufferStartTime`, for audio that may be discontiguous with previous input.
    public init(buffer: AVAudioPCMBuffer, bufferStartTime: CMTime?) {
        self.init(format: buffer.format, samples: buffer.interleavedSamples, bufferStartTime: bufferStartTime)
    }

    init(format: AVAudioFormat, samples: [Float], bufferStartTime: CMTime?) {
        bufferFormat = format
        self.samples = samples
        self.bufferStartTime = bufferStartTime
    }

    /// A new copy of the audio data for this input.
    public var buffer: AVAudioPCMBuffer {
        // The format held these samples when the input was made.
        AVAudioPCMBuffer(format: bufferFormat, interleavedSamples: samples)!
    }

    /// Frames (samples per channel).
    var frameLength: Int { samples.count / Int(bufferFormat.channelCount) }

    /// The length of this input (exact when the rate is a whole number of Hz).
    public var bufferDuration: CMTime {
        let rate = bufferFormat.sampleRate
        if rate.rounded() == rate, rate <= Double(Int32.max) { return CMTime(value: Int64(frameLength), timescale: Int32(rate)) }
        return CMTime(seconds: Double(frameLength) / rate, preferredTimescale: 1_000_000)
    }

    /// Frames `frames` as little-endian PCM of the input's format.
    func wireBytes(frames: Range<Int>) -> [UInt8] {
        let channels = Int(bufferFormat.channelCount)
        let slice = Array(samples[(frames.lowerBound * channels)..<(frames.upperBound * channels)])
        switch bufferFormat.commonFormat {
        case .pcmFormatInt16:
            return PCMSamples.s16le(slice)
        default:
            return slice.withUnsafeBytes { Array($0) }
        }
    }
}

/// Context that biases recognition (Apple's `AnalysisContext`).
public final class AnalysisContext: @unchecked Sendable {
    /// A category of contextual strings.
    public struct ContextualStringsTag: Hashable, Sendable, RawRepresentable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public init(_ rawValue: String) { self.rawValue = rawValue }
        public static let general = ContextualStringsTag("general")
    }

    /// A key for app data carried with the context.
    public struct UserDataTag: Hashable, Sendable, RawRepresentable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public init(_ rawValue: String) { self.rawValue = rawValue }
    }

    private let lock = NSLock()
    private var strings: [ContextualStringsTag: [String]] = [:]
    private var data: [UserDataTag: any Sendable] = [:]

    public init() {}

    /// Words and phrases likely to be spoken, by tag.
    public var contextualStrings: [ContextualStringsTag: [String]] {
        get { lock.withLock { strings } }
        set { lock.withLock { strings = newValue } }
    }

    /// App data kept with the context for the app's own use; it stays in this process.
    public var userData: [UserDataTag: any Sendable] {
        get { lock.withLock { data } }
        set { lock.withLock { data = newValue } }
    }

    var wire: AnalysisContextData {
        AnalysisContextData(contextualStrings: Dictionary(uniqueKeysWithValues: contextualStrings.map { ($0.key.rawValue, $0.value) }))
    }
}
