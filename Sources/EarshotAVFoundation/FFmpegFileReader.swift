import CFFmpeg
import EarshotAudio
import EarshotSystem

/// What ``AVAudioFile`` decodes from: interleaved Float32 frames a chunk at a time. Blocking.
protocol PCMFileSource: AnyObject {
    var sampleRate: Int { get }
    var channels: Int { get }
    /// Frames in the file, when the decoder knows (else 0).
    var frameCount: Int64 { get }
    /// Up to `frames` interleaved frames; empty at the end.
    func read(frames: Int) throws(AudioError) -> [Float]
}

extension AudioFileReader: PCMFileSource {}

/// FFmpeg's entry points, opened once when a file first needs them (`CFFmpeg` opens the libraries
/// with dlopen rather than linking them: see its shim.h).
enum FFmpeg {
    /// Why FFmpeg cannot be used (its libraries are not installed).
    struct Unavailable: Error {
        let reason: String
    }

    /// The loaded entry points, or why FFmpeg cannot be used.
    static let loaded: Result<earshot_ffmpeg, Unavailable> = {
        let api = UnsafeMutablePointer<earshot_ffmpeg>.allocate(capacity: 1)
        defer { api.deallocate() }
        var reason = [CChar](repeating: 0, count: 512)
        guard earshot_ffmpeg_load(api, &reason, reason.count) == 0 else {
            let text = String(cBuffer: reason)
            return .failure(Unavailable(reason: "FFmpeg is not available (\(text))"))
        }
        api.pointee.av_log_set_level(AV_LOG_QUIET)
        return .success(api.pointee)
    }()
}

/// The first audio stream of a container libsndfile does not read (m4a/AAC, mp4, webm, mkv, …),
/// decoded by FFmpeg (libavformat, libavcodec) and converted to interleaved Float32 by
/// libswresample. A file with no audio stream is ``AudioError/unreadable(path:reason:)`` saying so,
/// as is a system without FFmpeg's libraries. Blocking: use it on a dedicated thread.
final class FFmpegFileReader: PCMFileSource {
    let path: String
    let sampleRate: Int
    let channels: Int
    let frameCount: Int64
    private var format: UnsafeMutablePointer<AVFormatContext>?
    private var codec: UnsafeMutablePointer<AVCodecContext>?
    private var resampler: OpaquePointer?
    private let av: earshot_ffmpeg
    private var packet: UnsafeMutablePointer<AVPacket>?
    private var frame: UnsafeMutablePointer<AVFrame>?
    private let stream: Int32
    /// Decoded samples not yet returned.
    private var decoded: [Float] = []
    private var endOfInput = false
    private var drained = false

    /// The reason given for a container without audio.
    static let noAudioStream = "the file has no audio stream"

    init(path: String) throws(AudioError) {
        self.path = path
        let av: earshot_ffmpeg
        switch FFmpeg.loaded {
        case .success(let api): av = api
        case .failure(let missing): throw .unreadable(path: path, reason: missing.reason)
        }
        self.av = av
        packet = av.av_packet_alloc()
        frame = av.av_frame_alloc()
        var opened: UnsafeMutablePointer<AVFormatContext>?
        var status = av.avformat_open_input(&opened, path, nil, nil)
        guard status == 0, let opened else { throw .unreadable(path: path, reason: Self.message(av, status)) }
        format = opened
        // From here on deinit releases what was made.
        var decoder: UnsafePointer<AVCodec>?
        status = av.avformat_find_stream_info(opened, nil)
        let found = status < 0 ? status : av.av_find_best_stream(opened, AVMEDIA_TYPE_AUDIO, -1, -1, &decoder, 0)
        guard found >= 0, let decoder else {
            Self.release(av, format: &format, codec: &codec, resampler: &resampler, packet: &packet, frame: &frame)
            throw .unreadable(path: path, reason: found == status ? Self.message(av, status) : Self.noAudioStream)
        }
        stream = found
        let parameters = opened.pointee.streams[Int(found)]!.pointee.codecpar
        codec = av.avcodec_alloc_context3(decoder)
        guard let codec, av.avcodec_parameters_to_context(codec, parameters) >= 0, av.avcodec_open2(codec, decoder, nil) >= 0 else {
            Self.release(av, format: &format, codec: &codec, resampler: &resampler, packet: &packet, frame: &frame)
            throw .unreadable(path: path, reason: "FFmpeg cannot decode its audio stream")
        }
        sampleRate = Int(codec.pointee.sample_rate)
        channels = Int(codec.pointee.ch_layout.nb_channels)
        let streamInfo = opened.pointee.streams[Int(found)]!.pointee
        frameCount = streamInfo.duration > 0 ? streamInfo.duration * Int64(streamInfo.time_base.num) * Int64(sampleRate) / Int64(max(1, streamInfo.time_base.den)) : 0
        do {
            try AudioLimits.check(rate: sampleRate, channels: channels, what: path)
        } catch {
            Self.release(av, format: &format, codec: &self.codec, resampler: &resampler, packet: &packet, frame: &frame)
            throw error
        }
        var made: OpaquePointer?
        // The codec context's own layout, in place (it lives as long as the context).
        let layout = (UnsafeMutableRawPointer(codec) + MemoryLayout<AVCodecContext>.offset(of: \.ch_layout)!).assumingMemoryBound(to: AVChannelLayout.self)
        let configured = av.swr_alloc_set_opts2(&made, layout, AV_SAMPLE_FMT_FLT, Int32(sampleRate), layout, codec.pointee.sample_fmt, Int32(sampleRate), 0, nil)
        guard configured >= 0, let made, av.swr_init(made) >= 0 else {
            av.swr_free(&made)
            Self.release(av, format: &format, codec: &self.codec, resampler: &resampler, packet: &packet, frame: &frame)
            throw .unreadable(path: path, reason: "FFmpeg cannot convert its samples")
        }
        resampler = made
    }

    deinit { Self.release(av, format: &format, codec: &codec, resampler: &resampler, packet: &packet, frame: &frame) }

    private static func release(_ av: earshot_ffmpeg, format: inout UnsafeMutablePointer<AVFormatContext>?, codec: inout UnsafeMutablePointer<AVCodecContext>?,
                                resampler: inout OpaquePointer?, packet: inout UnsafeMutablePointer<AVPacket>?, frame: inout UnsafeMutablePointer<AVFrame>?) {
        av.swr_free(&resampler)
        av.avcodec_free_context(&codec)
        av.avformat_close_input(&format)
        av.av_packet_free(&packet)
        av.av_frame_free(&frame)
    }

    private static func message(_ av: earshot_ffmpeg, _ status: Int32) -> String {
        var text = [CChar](repeating: 0, count: 256)
        _ = av.av_strerror(status, &text, text.count)
        return String(cBuffer: text)
    }

    func read(frames requested: Int) throws(AudioError) -> [Float] {
        let wanted = max(1, min(requested, AudioFileReader.maxSamplesPerRead / channels)) * channels
        while decoded.count < wanted, !drained {
            try decodeMore()
        }
        let chunk = Array(decoded.prefix(wanted))
        decoded.removeFirst(chunk.count)
        return chunk
    }

    /// Converts the frames the decoder has ready; when it wants input, sends it the next packet of
    /// the stream (or the end of input).
    private func decodeMore() throws(AudioError) {
        guard let codec, let frame, let packet, let format else { drained = true; return }
        let received = av.avcodec_receive_frame(codec, frame)
        if received == 0 {
            try convert(frame)
            av.av_frame_unref(frame)
            return
        }
        if received == earshot_averror_eof() {
            drained = true
            return
        }
        guard received == earshot_averror_eagain(), !endOfInput else { throw .unreadable(path: path, reason: Self.message(av, received)) }
        while true {
            let read = av.av_read_frame(format, packet)
            if read < 0 {
                endOfInput = true
                _ = av.avcodec_send_packet(codec, nil) // drain the decoder
                return
            }
            defer { av.av_packet_unref(packet) }
            guard packet.pointee.stream_index == stream else { continue }
            let sent = av.avcodec_send_packet(codec, packet)
            guard sent >= 0 || sent == earshot_averror_eagain() else { throw .unreadable(path: path, reason: Self.message(av, sent)) }
            return
        }
    }

    private func convert(_ frame: UnsafeMutablePointer<AVFrame>) throws(AudioError) {
        let capacity = Int(av.swr_get_out_samples(resampler, frame.pointee.nb_samples))
        var output = [Float](repeating: 0, count: max(0, capacity) * channels)
        let converted = output.withUnsafeMutableBytes { bytes -> Int32 in
            var out: UnsafeMutablePointer<UInt8>? = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
            let input = UnsafeMutableRawPointer(frame.pointee.extended_data).map { $0.assumingMemoryBound(to: UnsafePointer<UInt8>?.self) }
            return av.swr_convert(resampler, &out, Int32(capacity), input, frame.pointee.nb_samples)
        }
        guard converted >= 0 else { throw .unreadable(path: path, reason: Self.message(av, converted)) }
        decoded += output.prefix(Int(converted) * channels)
    }
}
