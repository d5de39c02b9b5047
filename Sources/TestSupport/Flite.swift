import Foundation

/// English sentences spoken by Debian's `flite` (CMU's diphone and clustergen voices):
/// PocketSphinx's US English acoustic model hears them far better than espeak-ng's formant voices
/// (measured on chess commands: 55–71 % word errors with flite's voices, 94 % with espeak-ng's).
public enum Flite {
    /// Where Debian installs flite.
    public static let path = "/usr/bin/flite"
    public static var available: Bool { FileManager.default.isExecutableFile(atPath: path) }
    /// Two of flite's built-in voices: a male diphone voice and a female clustergen one.
    public static let voices = ["kal16", "slt"]

    /// `text` spoken by `voice` into `name` in `directory`, a 16 kHz mono WAV (the same samples
    /// every time); returns its path.
    public static func wav(_ text: String, voice: String, name: String, in directory: TempDirectory) async throws -> String {
        let spoken = directory.file("\(name).flite.wav"), converted = directory.file(name)
        let run = try await ChildProcess.run(path, ["-voice", voice, "-t", text, "-o", spoken], in: directory)
        guard run.status == 0 else { throw SynthesisError(message: "flite -voice \(voice) failed (\(run.status)): \(run.stderr)") }
        let convert = try await ChildProcess.run(Sox.path, Sox.arguments([spoken, "-r", "16000", "-c", "1", "-b", "16", converted]), in: directory)
        guard convert.status == 0 else { throw SynthesisError(message: "sox failed (\(convert.status)): \(convert.stderr)") }
        return converted
    }

    /// `text` spoken by `voice`, as 16 kHz mono samples.
    public static func samples(_ text: String, voice: String, in directory: TempDirectory) async throws -> [Float] {
        try LibriVox.samples(try await wav(text, voice: voice, name: "flite-\(voice)-16k.wav", in: directory))
    }
}
