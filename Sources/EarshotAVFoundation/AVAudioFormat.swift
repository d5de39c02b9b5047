/// Channels of a format (AVFoundation's `AVAudioChannelCount`).
public typealias AVAudioChannelCount = UInt32
/// Frames in a buffer (AVFoundation's `AVAudioFrameCount`).
public typealias AVAudioFrameCount = UInt32
/// A frame position in a file or stream (AVFoundation's `AVAudioFramePosition`).
public typealias AVAudioFramePosition = Int64

/// The sample formats buffers hold (AVFoundation's `AVAudioCommonFormat`).
public enum AVAudioCommonFormat: Sendable, Hashable {
    /// A format other than the ones below (only for file formats).
    case otherFormat
    /// 32-bit floats in [-1, 1].
    case pcmFormatFloat32
    /// Signed 16-bit integers.
    case pcmFormatInt16

    /// Bytes per sample (0 for `otherFormat`).
    var bytesPerSample: Int {
        switch self {
        case .otherFormat: 0
        case .pcmFormatFloat32: 4
        case .pcmFormatInt16: 2
        }
    }
}

/// A PCM format: rate, channels, sample format and layout (AVFoundation's `AVAudioFormat`).
/// Immutable.
public final class AVAudioFormat: Sendable, Hashable, CustomStringConvertible {
    public let commonFormat: AVAudioCommonFormat
    public let sampleRate: Double
    public let channelCount: AVAudioChannelCount
    /// Whether samples of all channels alternate in one buffer (else one buffer per channel).
    public let isInterleaved: Bool

    /// nil for a rate that is not positive and finite, no channels, or `otherFormat`.
    public init?(commonFormat format: AVAudioCommonFormat, sampleRate: Double, channels: AVAudioChannelCount, interleaved: Bool) {
        guard format != .otherFormat, sampleRate.isFinite, sampleRate > 0, channels > 0 else { return nil }
        commonFormat = format
        self.sampleRate = sampleRate
        channelCount = channels
        isInterleaved = interleaved
    }

    /// Float32, deinterleaved: the format AVFoundation calls standard.
    public convenience init?(standardFormatWithSampleRate sampleRate: Double, channels: AVAudioChannelCount) {
        self.init(commonFormat: .pcmFormatFloat32, sampleRate: sampleRate, channels: channels, interleaved: false)
    }

    /// Whether this is Float32, deinterleaved.
    public var isStandard: Bool { commonFormat == .pcmFormatFloat32 && !isInterleaved }

    public static func == (a: AVAudioFormat, b: AVAudioFormat) -> Bool {
        a.commonFormat == b.commonFormat && a.sampleRate == b.sampleRate && a.channelCount == b.channelCount && a.isInterleaved == b.isInterleaved
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(commonFormat)
        hasher.combine(sampleRate)
        hasher.combine(channelCount)
        hasher.combine(isInterleaved)
    }

    public var description: String {
        let sample = switch commonFormat {
        case .pcmFormatInt16: "Int16"
        case .pcmFormatFloat32: "Float32"
        case .otherFormat: "other"
        }
        return "AVAudioFormat(\(sampleRate) Hz, \(channelCount) ch, \(sample), \(isInterleaved ? "interleaved" : "deinterleaved"))"
    }
}

/// A time on an audio timeline, as a sample position at a rate (AVFoundation's `AVAudioTime`,
/// sample-time form only).
public final class AVAudioTime: Sendable {
    public let sampleTime: AVAudioFramePosition
    public let sampleRate: Double

    public init(sampleTime: AVAudioFramePosition, atRate sampleRate: Double) {
        self.sampleTime = sampleTime
        self.sampleRate = sampleRate
    }

    /// Always true: this stand-in only has sample times.
    public var isSampleTimeValid: Bool { true }
}
