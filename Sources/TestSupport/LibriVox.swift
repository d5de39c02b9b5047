import Foundation

/// The LibriVox test speech of Debian's pocketsphinx-testdata (16 kHz mono 16-bit WAV), as the
/// tests and benchmarks use it.
public enum LibriVox {
    public static let directory = "/usr/share/pocketsphinx/test/data/librivox"
    /// The five utterances, in reading order.
    public static let ids = [870, 880, 890, 920, 930].map { "sense_and_sensibility_01_austen_64kb-0\($0)" }

    public static func path(_ id: String) -> String { "\(directory)/\(id).wav" }

    /// Hypothesis words as the fixtures README scores them ("Mr." read as "mister").
    public static func words(_ hypothesis: String) -> [String] {
        WordErrorRate.words(hypothesis).map { $0 == "mr" ? "mister" : $0 }
    }

    /// WER of (reference, hypothesis) pairs with hypotheses normalized as ``words(_:)``.
    public static func wer(_ pairs: [(reference: String, hypothesis: String)]) -> Double {
        WordErrorRate.rate(pairs.map { ($0.reference, words($0.hypothesis).joined(separator: " ")) })
    }

    /// Writes the utterances `repeats` times, each followed by `silence` seconds of silence, as one
    /// 16 kHz mono 16-bit WAV file at `output`; returns the reference text.
    public static func writeRecording(to output: String, repeats: Int, silence: Double = 1) throws -> String {
        let references = try WordErrorRate.librivoxReferences()
        let utterances = try ids.map { try pcm(path($0)) }
        let gap = Data(count: 2 * Int(16000 * silence))
        var body = Data()
        for _ in 0..<repeats {
            for utterance in utterances { body += utterance + gap }
        }
        var file = Data()
        func append(_ value: some FixedWidthInteger) { withUnsafeBytes(of: value.littleEndian) { file.append(contentsOf: $0) } }
        file += Data("RIFF".utf8); append(UInt32(36 + body.count))
        file += Data("WAVEfmt ".utf8); append(UInt32(16)); append(UInt16(1)); append(UInt16(1))
        append(UInt32(16000)); append(UInt32(32000)); append(UInt16(2)); append(UInt16(16))
        file += Data("data".utf8); append(UInt32(body.count))
        try (file + body).write(to: URL(fileURLWithPath: output))
        let text = ids.map { references[$0] ?? "" }.joined(separator: " ")
        return Array(repeating: text, count: repeats).joined(separator: " ")
    }

    /// The samples of a 16 kHz mono 16-bit WAV file, in [-1, 1].
    public static func samples(_ path: String) throws -> [Float] {
        let bytes = try pcm(path)
        return stride(from: bytes.startIndex, to: bytes.endIndex - 1, by: 2).map {
            Float(Int16(bitPattern: UInt16(bytes[$0]) | UInt16(bytes[$0 + 1]) << 8)) / 32768
        }
    }

    /// The PCM bytes of a 16 kHz mono 16-bit WAV file (its `data` chunk).
    static func pcm(_ path: String) throws -> Data {
        let wav = try Data(contentsOf: URL(fileURLWithPath: path))
        func u32(_ at: Int) -> Int { wav[at..<at + 4].reversed().reduce(0) { $0 << 8 | Int($1) } }
        func u16(_ at: Int) -> Int { Int(wav[at]) | Int(wav[at + 1]) << 8 }
        var offset = 12
        var format: (rate: Int, channels: Int, bits: Int)?
        while offset + 8 <= wav.count {
            let id = String(decoding: wav[offset..<offset + 4], as: UTF8.self), size = u32(offset + 4)
            let body = offset + 8
            if id == "fmt " { format = (u32(body + 4), u16(body + 2), u16(body + 14)) }
            if id == "data", let format, format == (16000, 1, 16) { return wav[body..<min(body + size, wav.count)] }
            offset = body + size + size % 2
        }
        throw CocoaError(.fileReadCorruptFile, userInfo: [NSLocalizedDescriptionKey: "\(path) is not a 16 kHz mono 16-bit WAV file"])
    }
}
