import EarshotAudio
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An audio file open for reading (AVFoundation's `AVAudioFile`), decoded by libsndfile (WAV,
/// FLAC, Ogg/Vorbis, Opus, MP3, AIFF, …) or, for containers it does not read (m4a/AAC, mp4,
/// webm, mkv, …), by FFmpeg: the first audio stream. Reads are blocking; the
/// analyzer and ``AssetInputSequenceProvider`` read on dedicated threads. Safe to share: reads are
/// serialized.
public final class AVAudioFile: @unchecked Sendable {
    /// The file.
    public let url: URL
    /// The file's rate and channels (decoded as Float32).
    public let fileFormat: AVAudioFormat
    /// What ``read(into:)`` delivers: Float32, deinterleaved, at the file's rate and channels.
    public let processingFormat: AVAudioFormat
    /// Frames in the file (0 when libsndfile cannot tell).
    public let length: AVAudioFramePosition
    private let lock = NSLock()
    private let reader: any PCMFileSource
    private var position: AVAudioFramePosition = 0

    /// Opens `fileURL`; throws ``AudioError`` for an unreadable file (one with no audio stream says
    /// so) or a format outside ``AudioLimits`` (8000…384000 Hz, 1…8 channels).
    public init(forReading fileURL: URL) throws(AudioError) {
        reader = try Self.open(fileURL.path)
        url = fileURL
        let channels = AVAudioChannelCount(reader.channels), rate = Double(reader.sampleRate)
        // AudioLimits has checked rate and channels, so both formats exist.
        fileFormat = AVAudioFormat(commonFormat: .pcmFormatFloat32, sampleRate: rate, channels: channels, interleaved: true)!
        processingFormat = AVAudioFormat(standardFormatWithSampleRate: rate, channels: channels)!
        length = max(0, reader.frameCount)
    }

    /// libsndfile first; FFmpeg for what libsndfile cannot open (keeping libsndfile's reason when
    /// FFmpeg cannot open it either). A file the system cannot open at all (missing, no permission)
    /// is that error, and a directory says so, without loading FFmpeg's libraries to try it again.
    private static func open(_ path: String) throws(AudioError) -> any PCMFileSource {
        let probe = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard probe >= 0 else { throw .unreadable(path: path, reason: String(cString: strerror(errno))) }
        var status = stat()
        let isDirectory = fstat(probe, &status) == 0 && status.st_mode & S_IFMT == S_IFDIR
        close(probe)
        if isDirectory { throw .unreadable(path: path, reason: String(cString: strerror(EISDIR))) }
        do {
            return try AudioFileReader(path: path)
        } catch .unreadable(_, let reason) {
            do {
                return try FFmpegFileReader(path: path)
            } catch .unreadable(_, let ffmpegReason) where ffmpegReason != FFmpegFileReader.noAudioStream {
                // libsndfile's reason, and FFmpeg's when its libraries are missing.
                if case .failure = FFmpeg.loaded { throw .unreadable(path: path, reason: "\(reason); \(ffmpegReason)") }
                throw .unreadable(path: path, reason: reason)
            }
        }
    }

    /// The next frame ``read(into:)`` reads.
    public var framePosition: AVAudioFramePosition { lock.withLock { position } }

    /// Reads up to the buffer's capacity; `frameLength` 0 at the end of the file.
    public func read(into buffer: AVAudioPCMBuffer) throws(AudioError) {
        try read(into: buffer, frameCount: buffer.frameCapacity)
    }

    /// Reads up to `frames` frames (and the buffer's capacity) into `buffer`, whose rate and
    /// channels must be the file's.
    public func read(into buffer: AVAudioPCMBuffer, frameCount frames: AVAudioFrameCount) throws(AudioError) {
        guard buffer.format.sampleRate == processingFormat.sampleRate, buffer.format.channelCount == processingFormat.channelCount else {
            throw .unsupportedFormat("\(url.path): a \(buffer.format) buffer cannot hold \(processingFormat) audio")
        }
        try buffer.fill(interleavedSamples: readSamples(frames: Int(min(frames, buffer.frameCapacity))))
    }

    /// Up to `frames` interleaved Float32 frames; empty at the end of the file.
    package func readSamples(frames: Int) throws(AudioError) -> [Float] {
        lock.lock()
        defer { lock.unlock() }
        let samples = try reader.read(frames: frames)
        position += AVAudioFramePosition(samples.count / reader.channels)
        return samples
    }
}
