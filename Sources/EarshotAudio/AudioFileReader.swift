import CSndfile

/// Reads any format libsndfile decodes (WAV, FLAC, Ogg/Vorbis, Opus, MP3, AIFF, …) as interleaved
/// Float32 frames, a chunk at a time so long recordings stay in bounded memory: one read returns
/// at most ``maxSamplesPerRead`` samples whatever the file claims. Files outside ``AudioLimits``
/// (sample rate, channels) are refused when opened. Blocking: use it on a dedicated thread.
public final class AudioFileReader {
    /// Most interleaved samples one ``read(frames:)`` returns (4 MiB of Float32).
    public static let maxSamplesPerRead = 1 << 20

    public let path: String
    public let sampleRate: Int
    public let channels: Int
    /// Frames in the file, when libsndfile knows.
    public let frameCount: Int64
    private var file: OpaquePointer?

    public init(path: String) throws(AudioError) {
        var info = SF_INFO()
        guard let handle = sf_open(path, Int32(SFM_READ), &info) else {
            throw .unreadable(path: path, reason: String(cString: sf_strerror(nil)))
        }
        do {
            try AudioLimits.check(rate: Int(info.samplerate), channels: Int(info.channels), what: path)
        } catch {
            sf_close(handle)
            throw error
        }
        self.path = path
        file = handle
        sampleRate = Int(info.samplerate)
        channels = Int(info.channels)
        frameCount = Int64(info.frames)
    }

    deinit { if let file { sf_close(file) } }

    /// Up to `frames` interleaved frames (fewer when that would pass ``maxSamplesPerRead``); empty
    /// at the end of the file.
    public func read(frames requested: Int) throws(AudioError) -> [Float] {
        guard let file else { return [] }
        let frames = max(1, min(requested, Self.maxSamplesPerRead / channels))
        var buffer = [Float](repeating: 0, count: frames * channels)
        let got = buffer.withUnsafeMutableBufferPointer { sf_readf_float(file, $0.baseAddress, sf_count_t(frames)) }
        if got < 0 || (got == 0 && sf_error(file) != 0) {
            throw .unreadable(path: path, reason: String(cString: sf_strerror(file)))
        }
        buffer.removeSubrange(Int(got) * channels..<buffer.count)
        return buffer
    }

    /// The whole file (short clips and tests; prefer chunked reads for long audio).
    public func readAll() throws(AudioError) -> [Float] {
        var all: [Float] = []
        while true {
            let chunk = try read(frames: 65536)
            if chunk.isEmpty { return all }
            all += chunk
        }
    }
}
