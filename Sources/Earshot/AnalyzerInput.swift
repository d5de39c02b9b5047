import EarshotWire
import Foundation

/// A PCM format (the role `AVAudioFormat` plays on Apple platforms).
public struct AudioFormat: Sendable, Hashable, CustomStringConvertible {
    public enum CommonFormat: Sendable, Hashable {
        case pcmFormatInt16
        case pcmFormatFloat32
    }
    public let sampleRate: Double
    public let channelCount: Int
    public let commonFormat: CommonFormat

    public init(commonFormat: CommonFormat, sampleRate: Double, channels: Int) {
        self.commonFormat = commonFormat
        self.sampleRate = sampleRate
        channelCount = channels
    }

    public var description: String { "\(Int(sampleRate)) Hz, \(channelCount) ch, \(commonFormat == .pcmFormatInt16 ? "int16" : "float32")" }

    init(_ spec: AudioFormatSpec) {
        self.init(commonFormat: .pcmFormatInt16, sampleRate: Double(spec.rate), channels: spec.channels)
    }
}

/// Interleaved PCM samples in a format (the role `AVAudioPCMBuffer` plays).
public struct AudioBuffer: Sendable, Hashable {
    public let format: AudioFormat
    /// Interleaved samples in [-1, 1].
    public let samples: [Float]

    public init(format: AudioFormat, samples: [Float]) {
        self.format = format
        self.samples = samples
    }

    /// Frames (samples per channel).
    public var frameLength: Int { samples.count / max(format.channelCount, 1) }

    /// The samples as little-endian PCM of the buffer's format.
    var wireBytes: [UInt8] { wireBytes(frames: 0..<frameLength) }

    /// Frames `frames` as little-endian PCM of the buffer's format.
    func wireBytes(frames: Range<Int>) -> [UInt8] {
        let channels = max(format.channelCount, 1)
        let slice = Array(samples[(frames.lowerBound * channels)..<(frames.upperBound * channels)])
        switch format.commonFormat {
        case .pcmFormatInt16:
            return PCMSamples.s16le(slice)
        case .pcmFormatFloat32:
            return slice.withUnsafeBytes { Array($0) }
        }
    }
}

/// Audio for the analyzer with an optional start time on the session timeline (Apple's
/// `AnalyzerInput`). Without a start time it follows the previous input; with one, input may be
/// discontiguous.
public struct AnalyzerInput: Sendable {
    public let buffer: AudioBuffer
    public let bufferStartTime: CMTime?

    public init(buffer: AudioBuffer) {
        self.buffer = buffer
        bufferStartTime = nil
    }

    public init(buffer: AudioBuffer, bufferStartTime: CMTime?) {
        self.buffer = buffer
        self.bufferStartTime = bufferStartTime
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

    private let lock = NSLock()
    private var strings: [ContextualStringsTag: [String]] = [:]

    public init() {}

    /// Words and phrases likely to be spoken, by tag.
    public var contextualStrings: [ContextualStringsTag: [String]] {
        get { lock.withLock { strings } }
        set { lock.withLock { strings = newValue } }
    }

    var wire: AnalysisContextData {
        AnalysisContextData(contextualStrings: Dictionary(uniqueKeysWithValues: contextualStrings.map { ($0.key.rawValue, $0.value) }))
    }
}
