import Foundation

/// A sound file (anything libsndfile reads) decoded to 16 kHz mono floats a block at a time, so
/// memory stays bounded by the block however long the file is. Blocking: use it on a dedicated
/// thread or queue. Calls are serialized by a lock, so it may be handed between threads.
public final class SpeechFileDecoder: @unchecked Sendable {
    /// The file's own rate and channel count.
    public let sampleRate: Int
    public let channels: Int
    /// Seconds of audio in the file.
    public let duration: Double
    private let reader: AudioFileReader
    private let resampler: Resampler?
    private let lock = NSLock()
    // Guarded by `lock` (with the reader and resampler).
    private var done = false

    public init(path: String) throws(AudioError) {
        reader = try AudioFileReader(path: path)
        sampleRate = reader.sampleRate
        channels = reader.channels
        duration = Double(reader.frameCount) / Double(max(1, reader.sampleRate))
        resampler = reader.sampleRate == 16000 ? nil : try Resampler(from: reader.sampleRate, to: 16000, channels: 1)
    }

    /// The next block (about two seconds), or nil after the last; the resampler's tail comes last.
    public func next() throws(AudioError) -> [Float]? {
        lock.lock()
        defer { lock.unlock() }
        while !done {
            let chunk = try reader.read(frames: reader.sampleRate * 2)
            if chunk.isEmpty {
                done = true
                let tail = try resampler?.flush() ?? []
                return tail.isEmpty ? nil : tail
            }
            let mono = PCM.downmix(chunk, channels: reader.channels)
            let block = try resampler?.process(mono) ?? mono
            if !block.isEmpty { return block }
        }
        return nil
    }
}
