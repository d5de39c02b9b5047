import Earshot
import Testing
import TestSupport

/// The stand-ins and the converter without a daemon: Apple's shapes and the silent failures the
/// reference warns about.
@Suite struct StandInTests {
    static let analyzerFormat = AVAudioFormat(commonFormat: .pcmFormatInt16, sampleRate: 16000, channels: 1, interleaved: true)!
    static let stereo48k = AVAudioFormat(commonFormat: .pcmFormatFloat32, sampleRate: 48000, channels: 2, interleaved: false)!

    /// One second of a 440 Hz tone at 48 kHz stereo, in deinterleaved buffers of `frames`.
    static func tone(buffers count: Int, frames: AVAudioFrameCount) -> [AVAudioPCMBuffer] {
        (0..<count).map { index in
            let buffer = AVAudioPCMBuffer(pcmFormat: stereo48k, frameCapacity: frames)!
            buffer.frameLength = frames
            for frame in 0..<Int(frames) {
                let t = Double(index * Int(frames) + frame) / 48000
                buffer.floatChannelData![0][frame] = Float(sin(2 * .pi * 440 * t) * 0.5)
                buffer.floatChannelData![1][frame] = Float(sin(2 * .pi * 440 * t) * 0.4)
            }
            return buffer
        }
    }

    /// Regression (the seed's silent failure): the converter must hand back the tail it holds.
    /// 48 kHz stereo in, 16 kHz mono out: convert gives less than all, flush the rest.
    @Test func converterFlushKeepsTheTail() throws {
        let converter = AnalyzerInputConverter(analyzerFormat: Self.analyzerFormat)
        var frames = 0
        for buffer in Self.tone(buffers: 10, frames: 4800) {
            frames += try converter.convert(buffer, at: nil).reduce(0) { $0 + Int($1.buffer.frameLength) }
        }
        let tail = try converter.flush()
        let tailFrames = tail.reduce(0) { $0 + Int($1.buffer.frameLength) }
        #expect(tailFrames > 0, "libsoxr holds frames until flush")
        #expect(abs(frames + tailFrames - 16000) <= 1, "one second in, one second out")
        for input in tail {
            #expect(input.bufferFormat == Self.analyzerFormat)
            #expect(input.bufferStartTime == nil, "contiguous input carries no start time")
        }
    }

    /// A buffer whose time does not continue the previous one starts a discontiguous stretch:
    /// the first input after it carries its time; one that continues carries none.
    @Test func converterMarksDiscontinuities() throws {
        let converter = AnalyzerInputConverter(analyzerFormat: Self.analyzerFormat)
        let buffers = Self.tone(buffers: 3, frames: 4800)
        _ = try converter.convert(buffers[0], at: AVAudioTime(sampleTime: 0, atRate: 48000))
        let contiguous = try converter.convert(buffers[1], at: AVAudioTime(sampleTime: 4800, atRate: 48000))
        #expect(contiguous.allSatisfy { $0.bufferStartTime == nil })
        let skipped = try converter.convert(buffers[2], at: AVAudioTime(sampleTime: 96000, atRate: 48000))
        let started = try #require(skipped.first { $0.bufferStartTime != nil })
        #expect(started.bufferStartTime == CMTime(value: 2, timescale: 1))
        #expect(skipped.first?.bufferStartTime == nil, "the previous stretch's tail comes first, contiguous")
    }

    /// AVAudioConverter's pull conversion as microphone-tap code uses it (each tap buffer handed
    /// over once, then `.noDataNow`; `.endOfStream` at the end): a second at 48 kHz stereo comes
    /// out as a second at 16 kHz mono, the resampler's tail included.
    @Test func pullConversionAsATapUsesIt() throws {
        let converter = try #require(AVAudioConverter(from: Self.stereo48k, to: Self.analyzerFormat))
        var frames = 0
        for buffer in Self.tone(buffers: 10, frames: 4800) {
            let capacity = AVAudioFrameCount(Double(buffer.frameLength) * Self.analyzerFormat.sampleRate / Self.stereo48k.sampleRate) + 32
            let converted = try #require(AVAudioPCMBuffer(pcmFormat: Self.analyzerFormat, frameCapacity: capacity))
            var consumed = false
            var error: NSError?
            let status = converter.convert(to: converted, error: &error) { _, inputStatus in
                if consumed {
                    inputStatus.pointee = .noDataNow
                    return nil
                }
                consumed = true
                inputStatus.pointee = .haveData
                return buffer
            }
            #expect(error == nil && (status == .inputRanDry || status == .haveData))
            frames += Int(converted.frameLength)
        }
        let tail = try #require(AVAudioPCMBuffer(pcmFormat: Self.analyzerFormat, frameCapacity: 16000))
        #expect(converter.convert(to: tail, error: nil) { _, inputStatus in
            inputStatus.pointee = .endOfStream
            return nil
        } == .haveData)
        #expect(tail.frameLength > 0, "the end of the stream drains the resampler")
        #expect(abs(frames + Int(tail.frameLength) - 16000) <= 1)
        #expect(converter.convert(to: tail, error: nil) { _, _ in nil } == .endOfStream)
    }

    /// AVAudioPCMBuffer's shape: capacity, length, per-channel pointers when deinterleaved, one
    /// strided pointer when interleaved, and the sample-type accessors.
    @Test func pcmBufferHasApplesShape() throws {
        let format = try #require(AVAudioFormat(commonFormat: .pcmFormatFloat32, sampleRate: 44100, channels: 2, interleaved: true))
        let buffer = try #require(AVAudioPCMBuffer(pcmFormat: format, frameCapacity: 8))
        #expect(buffer.frameCapacity == 8 && buffer.frameLength == 0 && buffer.stride == 2)
        #expect(buffer.int16ChannelData == nil)
        buffer.frameLength = 2
        buffer.floatChannelData![0][3] = 0.25 // frame 1, right channel
        let converter = try #require(AVAudioConverter(from: format, to: AVAudioFormat(commonFormat: .pcmFormatInt16, sampleRate: 44100, channels: 1, interleaved: true)!))
        let mono = try #require(AVAudioPCMBuffer(pcmFormat: converter.outputFormat, frameCapacity: 2))
        try converter.convert(to: mono, from: buffer)
        #expect(mono.frameLength == 2)
        #expect(mono.int16ChannelData![0][1] == 4096, "downmixed: 0.25 / 2 as Int16")
        #expect(AVAudioFormat(commonFormat: .pcmFormatInt16, sampleRate: 0, channels: 1, interleaved: true) == nil)
        #expect(AVAudioFormat(standardFormatWithSampleRate: 16000, channels: 1)?.isStandard == true)
    }

    /// CoreMedia's constructors and functions, and diagnostics that name CoreMedia's types, not
    /// the wire protocol's.
    @Test func cmTimeHasCoreMediasShape() {
        let time = CMTime(seconds: 1.5, preferredTimescale: 600)
        #expect(time.value == 900 && time.timescale == 600)
        #expect(CMTimeGetSeconds(time) == 1.5)
        let range = CMTimeRange(start: .zero, end: time)
        #expect(range.containsTime(CMTime(value: 1, timescale: 1)))
        #expect(!range.containsTime(time), "the end is not in the range")
        #expect(CMTimeRangeGetEnd(range) == CMTime(value: 3, timescale: 2))
        #expect(String(describing: type(of: time)) == "CMTime")
        #expect(!"\(time) \(range)".contains("Wire"))
    }

    /// Strategy A's look-up: the runs whose time ranges meet the result's range; nil when the text
    /// carries no time ranges (the seed's silent append-only degradation is visible).
    @Test func rangeOfAudioTimeRangeAttributes() throws {
        func word(_ text: String, _ start: Int64, _ end: Int64) -> AttributedString {
            var piece = AttributedString(text)
            piece.audioTimeRange = CMTimeRange(start: CMTime(value: start, timescale: 10), end: CMTime(value: end, timescale: 10))
            return piece
        }
        let transcript = word("one", 0, 5) + word(" two", 5, 10) + word(" three", 10, 15)
        let range = try #require(transcript.rangeOfAudioTimeRangeAttributes(intersecting: CMTimeRange(start: CMTime(value: 6, timescale: 10), end: CMTime(value: 12, timescale: 10))))
        #expect(String(transcript[range].characters) == " two three")
        #expect(transcript.rangeOfAudioTimeRangeAttributes(intersecting: CMTimeRange(start: CMTime(value: 2, timescale: 1), duration: CMTime(value: 1, timescale: 1))) == nil)
        #expect(AttributedString("untimed").rangeOfAudioTimeRangeAttributes(intersecting: CMTimeRange(start: .zero, duration: CMTime(value: 1, timescale: 1))) == nil)
    }

    /// The 27.0 SDK's order (the later capture wins over 26.5).
    @Test func statusIsComparableInDeclarationOrder() {
        let sorted = [AssetInventory.Status.installed, .supported, .downloading, .unsupported].sorted()
        #expect(sorted == [.unsupported, .downloading, .supported, .installed])
    }

    /// Regression: with no daemon answering, the library said "unsupported" silently. A throwing
    /// call now says that none answers (with starting a user daemon turned off for the test).
    @Test func noDaemonIsAClearErrorNotUnsupported() async throws {
        let directory = try TempDirectory("esnod")
        defer { directory.remove() }
        await EarshotService.shared.configure(appID: "com.example.porting.nodaemon", socket: directory.file("none/earshot.sock"), startsUserDaemon: false)
        let error = await #expect(throws: EarshotError.self) {
            _ = try await AssetInventory.assetInstallationRequest(supporting: [SpeechTranscriber(locale: Locale(identifier: "en-US"), preset: .transcription)])
        }
        #expect("\(error.map { "\($0)" } ?? "")".contains("no Earshot daemon answers"))
    }
}
