import EarshotWire
import EarshotAudio
import Foundation
import Testing
import TestSupport

@Suite struct AudioTests {
    static let librivox = "/usr/share/pocketsphinx/test/data/librivox/sense_and_sensibility_01_austen_64kb-0870.wav"

    @Test func readsARealRecordingWithLibsndfile() throws {
        let reader = try AudioFileReader(path: Self.librivox)
        #expect(reader.sampleRate == 16000)
        #expect(reader.channels == 1)
        let samples = try reader.readAll()
        #expect(Int64(samples.count) == reader.frameCount)
        #expect(samples.count > 16000) // more than a second of speech
        let peak = samples.map(abs).max() ?? 0
        #expect(peak > 0.05 && peak <= 1)
    }

    @Test func chunkedReadsEqualOneRead() throws {
        let whole = try AudioFileReader(path: Self.librivox).readAll()
        let reader = try AudioFileReader(path: Self.librivox)
        var chunked: [Float] = []
        while case let chunk = try reader.read(frames: 777), !chunk.isEmpty { chunked += chunk }
        #expect(chunked == whole)
    }

    @Test func unreadableFilesGiveATypedError() throws {
        let dir = try TempDirectory()
        defer { dir.remove() }
        let bogus = try dir.write("not-audio.wav", "RIFF but not really")
        #expect(throws: AudioError.self) { try AudioFileReader(path: bogus) }
        #expect(throws: AudioError.self) { try AudioFileReader(path: dir.file("missing.wav")) }
    }

    @Test func resamplingPreservesDurationAndPitch() throws {
        // A 440 Hz tone at 44.1 kHz stereo → 16 kHz: same duration, same frequency (zero crossings).
        let seconds = 2.0
        let rate = 44100
        var stereo: [Float] = []
        for i in 0..<Int(seconds * Double(rate)) {
            let v = Float(sin(2 * Double.pi * 440 * Double(i) / Double(rate))) * 0.5
            stereo += [v, v]
        }
        let mono = PCM.downmix(stereo, channels: 2)
        let resampler = try Resampler(from: rate, to: 16000, channels: 1)
        var out: [Float] = []
        for start in stride(from: 0, to: mono.count, by: 4410) {
            out += try resampler.process(Array(mono[start..<min(start + 4410, mono.count)]))
        }
        out += try resampler.flush()
        #expect(abs(out.count - 32000) <= 2)
        let crossings = zip(out.dropFirst(), out).filter { $0.0 >= 0 && $0.1 < 0 }.count
        #expect(abs(crossings - 880) <= 3) // 440 Hz over 2 s
        #expect(try Resampler.convert(out, from: 16000, to: 16000, channels: 1) == out)
    }

    @Test func integerPCMConversions() throws {
        #expect(try PCM.floats(fromLittleEndian: [0x00, 0x80, 0xFF, 0x7F, 0x00, 0x00], width: 2) == [-1, Float(32767) / 32768, 0])
        #expect(try PCM.floats(fromLittleEndian: [0, 128, 255], width: 1) == [-1, 0, Float(127) / 128])
        #expect(throws: AudioError.self) { try PCM.floats(fromLittleEndian: [1, 2, 3], width: 2) }
        #expect(throws: AudioError.self) { try PCM.floats(fromLittleEndian: [1, 2, 3], width: 3) }
        let samples: [Float] = [0, 0.5, -0.5, 1, -1]
        #expect(try PCM.floats(fromLittleEndian: PCMSamples.s16le(samples), width: 2).map { ($0 * 1000).rounded() } == [0, 500, -500, 1000, -1000])
    }

    /// A 16-bit PCM WAV file (RIFF header written by hand, so any rate can be declared).
    static func wav(rate: Int, channels: Int, frames: Int, in directory: TempDirectory, name: String = "test.wav") throws -> String {
        func le32(_ v: Int) -> [UInt8] { (0..<4).map { UInt8((v >> (8 * $0)) & 0xFF) } }
        func le16(_ v: Int) -> [UInt8] { (0..<2).map { UInt8((v >> (8 * $0)) & 0xFF) } }
        let data = frames * channels * 2
        var bytes = Array("RIFF".utf8) + le32(36 + data) + Array("WAVEfmt ".utf8) + le32(16) + le16(1) + le16(channels)
        bytes += le32(rate) + le32(rate * channels * 2) + le16(channels * 2) + le16(16) + Array("data".utf8) + le32(data)
        bytes += [UInt8](repeating: 0, count: data)
        let path = directory.file(name)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// Issue 8 #1 and #9: a file at 1 Hz (or with absurd channels) is refused when opened, with a
    /// message naming the supported range, instead of being resampled by a factor of 16000.
    @Test func oneFrameTakesTheDaemonDownFromAFile() throws {
        let dir = try TempDirectory()
        defer { dir.remove() }
        for (rate, channels) in [(1, 1), (7999, 1), (400_000, 1), (16000, 9)] {
            let path = try Self.wav(rate: rate, channels: channels, frames: 100, in: dir, name: "r\(rate)c\(channels).wav")
            do {
                _ = try AudioFileReader(path: path)
                Issue.record("\(rate) Hz × \(channels) was opened")
            } catch {
                #expect(error.description.contains(path), "\(error)")
                #expect(error.description.contains(rate == 1 || rate == 7999 || rate == 400_000 ? "8000…384000 Hz" : "1…8"), "\(error)")
            }
        }
        // The extremes of the range open; reads never pass the per-read bound.
        let low = try AudioFileReader(path: try Self.wav(rate: 8000, channels: 8, frames: 300_000, in: dir, name: "low.wav"))
        #expect(low.sampleRate == 8000 && low.channels == 8)
        #expect(try low.read(frames: 10_000_000).count == AudioFileReader.maxSamplesPerRead)
        #expect(try AudioFileReader(path: try Self.wav(rate: 384_000, channels: 1, frames: 10, in: dir, name: "high.wav")).sampleRate == 384_000)
    }

    /// Issue 8 #1: every conversion is bounded by its output block, and ratios outside the
    /// documented range are refused before libsoxr sees them.
    @Test func oneFrameTakesTheDaemonDownInTheResampler() throws {
        for (from, to, channels) in [(1, 16000, 1), (16000, 1, 1), (7999, 16000, 1), (16000, 384_001, 1), (16000, 48000, 0), (16000, 48000, 9)] {
            #expect(throws: AudioError.self, "\(from) → \(to) Hz × \(channels)") { try Resampler(from: from, to: to, channels: channels) }
        }
        // The largest ratio allowed (8 kHz → 384 kHz, ×48): 64 Ki input frames come out in blocks.
        let resampler = try Resampler(from: 8000, to: 384_000, channels: 1)
        var blocks: [Int] = []
        let input = (0..<65536).map { Float(sin(Double($0) * 0.1)) * 0.5 }
        try resampler.process(input) { blocks.append($0.count) }
        try resampler.flush { blocks.append($0.count) }
        #expect(blocks.allSatisfy { $0 <= Resampler.blockFrames })
        #expect(abs(blocks.reduce(0, +) - 65536 * 48) <= 48)
    }

    /// Issue 8 #1 and #8: the Wyoming path's converter: every width, downmix, resampling, partial
    /// frames refused with a message that says why.
    @Test func wrongErrorCodeForAPartialFrameInTheConverter() throws {
        #expect(throws: AudioError.self) { try PCMConverter(rate: 1, width: 1, channels: 1) }
        #expect(throws: AudioError.self) { try PCMConverter(rate: 16000, width: 3, channels: 1) }
        let stereo = try PCMConverter(rate: 16000, width: 2, channels: 2)
        do {
            try stereo.convert([0, 0, 0, 0, 0, 0][...]) { _ in }
            Issue.record("6 bytes of 4-byte frames were converted")
        } catch let error as AudioError {
            #expect(error.description.contains("6 bytes is not a whole number of 4-byte frames"), "\(error)")
        }
        // s16 stereo at 16 kHz: averaged, not resampled.
        var out: [Float] = []
        try stereo.convert(PCMSamples.s16le([0.5, -0.5, 0.25, 0.25])[...]) { out += $0 }
        #expect(out == [0, 0.25])
        // u8 mono at 8 kHz, one second → about 16000 samples, in blocks.
        let low = try PCMConverter(rate: 8000, width: 1, channels: 1)
        var count = 0
        try low.convert([UInt8](repeating: 0x80, count: 8000)[...]) { count += $0.count }
        try low.flush { count += $0.count }
        #expect(abs(count - 16000) <= 2)
        #expect(try PCMConverter(rate: 16000, width: 2, channels: 1).isPassThrough)
    }
}
