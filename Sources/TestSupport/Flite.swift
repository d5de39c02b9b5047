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

    /// `text` spoken by `voice`, as 16 kHz mono samples (the same samples every time).
    public static func samples(_ text: String, voice: String, in directory: TempDirectory) async throws -> [Float] {
        let wav = directory.file("flite-\(voice).wav"), converted = directory.file("flite-\(voice)-16k.wav")
        let run = try await ChildProcess.run(path, ["-voice", voice, "-t", text, "-o", wav], in: directory)
        guard run.status == 0 else { throw SynthesisError(message: "flite -voice \(voice) failed (\(run.status)): \(run.stderr)") }
        let convert = try await ChildProcess.run(Sox.path, Sox.arguments([wav, "-r", "16000", "-c", "1", "-b", "16", converted]), in: directory)
        guard convert.status == 0 else { throw SynthesisError(message: "sox failed (\(convert.status)): \(convert.stderr)") }
        return try LibriVox.samples(converted)
    }
}
