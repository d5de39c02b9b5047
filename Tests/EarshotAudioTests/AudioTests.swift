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
}
