/// Audio in a format (AVFoundation's `AVAudioBuffer`); the buffers here are all
/// ``AVAudioPCMBuffer``s.
public class AVAudioBuffer {
    public let format: AVAudioFormat
    init(format: AVAudioFormat) { self.format = format }
}

/// A buffer of PCM audio in a format (AVFoundation's `AVAudioPCMBuffer`): room for
/// ``frameCapacity`` frames, of which ``frameLength`` are valid. Samples are reached through
/// ``floatChannelData`` (Float32 formats) or ``int16ChannelData`` (Int16 formats): one pointer per
/// channel when deinterleaved, one pointer with ``stride`` equal to the channel count when
/// interleaved. Like AVFoundation's, not for concurrent use.
public final class AVAudioPCMBuffer: AVAudioBuffer {
    public let frameCapacity: AVAudioFrameCount
    /// Valid frames; at most ``frameCapacity``.
    public var frameLength: AVAudioFrameCount {
        didSet { precondition(frameLength <= frameCapacity, "frameLength \(frameLength) exceeds frameCapacity \(frameCapacity)") }
    }
    private let storage: UnsafeMutableRawPointer
    private let channelPointers: UnsafeMutablePointer<UnsafeMutableRawPointer>

    /// nil for a format whose samples it cannot hold.
    public init?(pcmFormat format: AVAudioFormat, frameCapacity: AVAudioFrameCount) {
        let bytes = format.commonFormat.bytesPerSample
        guard bytes > 0 else { return nil }
        self.frameCapacity = frameCapacity
        frameLength = 0
        let channels = Int(format.channelCount)
        let samples = max(1, Int(frameCapacity) * channels)
        storage = .allocate(byteCount: samples * bytes, alignment: 16)
        storage.initializeMemory(as: UInt8.self, repeating: 0, count: samples * bytes)
        let pointers = format.isInterleaved ? 1 : channels
        channelPointers = .allocate(capacity: pointers)
        for channel in 0..<pointers {
            (channelPointers + channel).initialize(to: storage + channel * Int(frameCapacity) * bytes)
        }
        super.init(format: format)
    }

    deinit {
        channelPointers.deallocate()
        storage.deallocate()
    }

    /// Samples between one frame and the next in a channel pointer: the channel count when
    /// interleaved, else 1.
    public var stride: Int { format.isInterleaved ? Int(format.channelCount) : 1 }

    /// The Float32 samples, or nil when the format is not Float32.
    public var floatChannelData: UnsafePointer<UnsafeMutablePointer<Float>>? {
        guard format.commonFormat == .pcmFormatFloat32 else { return nil }
        return UnsafeRawPointer(channelPointers).assumingMemoryBound(to: UnsafeMutablePointer<Float>.self)
    }

    /// The Int16 samples, or nil when the format is not Int16.
    public var int16ChannelData: UnsafePointer<UnsafeMutablePointer<Int16>>? {
        guard format.commonFormat == .pcmFormatInt16 else { return nil }
        return UnsafeRawPointer(channelPointers).assumingMemoryBound(to: UnsafeMutablePointer<Int16>.self)
    }

    /// Sample `frame` of `channel` as Float32 in [-1, 1].
    private func sample(_ frame: Int, _ channel: Int) -> Float {
        let (pointer, index) = format.isInterleaved ? (0, frame * Int(format.channelCount) + channel) : (channel, frame)
        return switch format.commonFormat {
        case .pcmFormatInt16: Float(channelPointers[pointer].assumingMemoryBound(to: Int16.self)[index]) / 32768
        default: channelPointers[pointer].assumingMemoryBound(to: Float.self)[index]
        }
    }

    private func setSample(_ value: Float, _ frame: Int, _ channel: Int) {
        let (pointer, index) = format.isInterleaved ? (0, frame * Int(format.channelCount) + channel) : (channel, frame)
        switch format.commonFormat {
        case .pcmFormatInt16: channelPointers[pointer].assumingMemoryBound(to: Int16.self)[index] = Int16(max(-32768, min(32767, (value * 32768).rounded())))
        default: channelPointers[pointer].assumingMemoryBound(to: Float.self)[index] = value
        }
    }

    /// The valid frames as interleaved Float32 samples.
    package var interleavedSamples: [Float] {
        let channels = Int(format.channelCount)
        var out = [Float](repeating: 0, count: Int(frameLength) * channels)
        for frame in 0..<Int(frameLength) {
            for channel in 0..<channels { out[frame * channels + channel] = sample(frame, channel) }
        }
        return out
    }

    /// A buffer in `format` holding interleaved Float32 `samples` (whole frames), length = capacity.
    package convenience init?(format: AVAudioFormat, interleavedSamples samples: [Float]) {
        self.init(pcmFormat: format, frameCapacity: AVAudioFrameCount(samples.count / Int(format.channelCount)))
        fill(interleavedSamples: samples)
    }

    /// Replaces the contents with interleaved Float32 `samples` (at most ``frameCapacity`` frames).
    package func fill(interleavedSamples samples: [Float]) {
        let channels = Int(format.channelCount)
        frameLength = AVAudioFrameCount(samples.count / channels)
        for frame in 0..<Int(frameLength) {
            for channel in 0..<channels { setSample(samples[frame * channels + channel], frame, channel) }
        }
    }
}
