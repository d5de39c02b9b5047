import Foundation

/// Known sentences spoken by Debian's `espeak-ng`, for language identification and translation
/// tests: each with the content words a transcript of it must contain. espeak-ng's formant voices
/// are far from the speech Whisper learned from (its French especially): these sentences and rates
/// are ones Whisper base (int8) recognizes; many others it does not.
public struct SynthesizedSpeech: Sendable, Hashable {
    /// BCP-47 language (and espeak-ng voice).
    public var language: String
    public var text: String
    /// Words per minute.
    public var rate: Int
    /// Lower-case words that must appear in a transcript (content words that survive synthesis).
    public var contentWords: [String]
    /// Lower-case English words a translation must contain at least two of.
    public var englishWords: [String]

    public init(language: String, text: String, rate: Int, contentWords: [String] = [], englishWords: [String] = []) {
        self.language = language
        self.text = text
        self.rate = rate
        self.contentWords = contentWords
        self.englishWords = englishWords
    }

    public static let spanish = SynthesizedSpeech(
        language: "es", text: "Buenos días. Mi hermano trabaja en un hospital muy grande de la ciudad.", rate: 140,
        contentWords: ["hermano", "hospital", "ciudad"], englishWords: ["brother", "hospital", "big", "city"])
    /// Its last words ("die Nachrichten aus der Stadt") come back as "die achten Ausdächtheit" from
    /// the whole clip resampled by the engine (libsoxr) since the decoder quantized each row on its
    /// own (issue 29), though the same clip resampled by sox, the daemon's segment of it and
    /// language identification still read them: "stadt" was a content word until then.
    public static let german = SynthesizedSpeech(
        language: "de", text: "Guten Morgen. Heute sprechen wir über das Wetter und die Nachrichten aus der Stadt.", rate: 140,
        contentWords: ["morgen", "heute", "sprechen"], englishWords: ["morning", "today", "weather", "city"])
    /// Opens with a greeting as the others do: without it, Whisper base (int8) identified the
    /// sentence as English on an AVX-512 VNNI CPU (and translated it), though not on the machine
    /// the tests were written on — ONNX Runtime's int8 kernels differ by CPU, and the bare
    /// sentence was too close to call.
    public static let french = SynthesizedSpeech(
        language: "fr", text: "Bonjour. La ville de Paris est la capitale de la France.", rate: 170,
        contentWords: ["paris", "capitale", "france"], englishWords: ["paris", "capital", "france"])
    public static let all = [spanish, german, french]

    /// Where Debian installs espeak-ng.
    public static let espeak = "/usr/bin/espeak-ng"
    public static var available: Bool { FileManager.default.isExecutableFile(atPath: espeak) }

    /// Speaks the sentence into `name` in `directory` (a 22.05 kHz mono WAV); returns its path.
    public func wav(in directory: TempDirectory, name: String? = nil) async throws -> String {
        let path = directory.file(name ?? "\(language).wav")
        let run = try await ChildProcess.run(Self.espeak, ["-v", language, "-s", "\(rate)", "-w", path, text], in: directory)
        guard run.status == 0, FileManager.default.fileExists(atPath: path) else {
            throw SynthesisError(message: "espeak-ng -v \(language) failed (\(run.status)): \(run.stderr)")
        }
        return path
    }

    /// Speaks the sentence and converts it to 16 kHz mono samples (as Whisper takes them), the same
    /// samples every time.
    public func samples(in directory: TempDirectory) async throws -> [Float] {
        let wav = try await wav(in: directory)
        let converted = directory.file("\(language)-16k.wav")
        let run = try await ChildProcess.run(Sox.path, Sox.arguments([wav, "-r", "16000", "-c", "1", "-b", "16", converted]), in: directory)
        guard run.status == 0 else { throw SynthesisError(message: "sox failed (\(run.status)): \(run.stderr)") }
        return try LibriVox.samples(converted)
    }

    /// Lower-cased words of `text` without punctuation.
    public static func words(_ text: String) -> [String] {
        text.lowercased().split { !$0.isLetter && !$0.isNumber && $0 != "'" }.map(String.init)
    }
}

/// espeak-ng did not produce the audio.
public struct SynthesisError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
