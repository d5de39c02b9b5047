import Foundation

/// Public-domain readings from the PyPI wheel `moonshine-voice==0.1.5` (`moonshine_voice/assets/`),
/// which `Scripts/setup.sh` downloads and extracts: `two_cities.wav` (44 s, 48 kHz, the opening of
/// A Tale of Two Cities) and `beckett.wav` (10 s, Worstward Ho). Another reader, another
/// recording: joined after the LibriVox clips they make the recording of issue 26, whose windows
/// run from one reader into the next.
public enum PublicDomainReadings {
    /// Where setup extracts them.
    public static let directory = "/var/cache/earshot/test-speech"
    public static let twoCities = directory + "/two_cities.wav"
    public static let beckett = directory + "/beckett.wav"
    public static var present: Bool { [twoCities, beckett].allSatisfy { FileManager.default.isReadableFile(atPath: $0) } }

    /// What is read in `two_cities.wav` (Dickens' text).
    public static let twoCitiesText = """
        It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of \
        foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light, \
        it was the season of Darkness, it was the spring of hope, it was the winter of despair, we had \
        everything before us, we had nothing before us, we were all going direct to Heaven, we were all going \
        direct the other way, in short, the period was so far like the present period, that some of its \
        noisiest authorities insisted on its being received, for good or for evil, in the superlative degree \
        of comparison only.
        """
    /// What is read in `beckett.wav`.
    public static let beckettText = "Ever tried. Ever failed. No matter. Try again. Fail again. Fail better."

    /// Issue 26's recipe: `seconds` of silence, the five LibriVox clips sorted by name, then both
    /// readings converted with `sox IN -r 16000 -c 1 -b 16 OUT`, joined by `sox` into one 16 kHz
    /// mono WAV file at `output`. Returns the reference text.
    public static func writeReadersRecording(to output: String, leadingSilence seconds: Double = 0) throws -> String {
        let directory = (output as NSString).deletingLastPathComponent
        var parts: [String] = []
        if seconds > 0 {
            let silence = directory + "/lead.wav"
            try sox(["-n", "-r", "16000", "-c", "1", "-b", "16", silence, "trim", "0", String(format: "%.3f", seconds)])
            parts.append(silence)
        }
        parts += LibriVox.ids.sorted().map(LibriVox.path)
        for (name, path) in [("two_cities16.wav", twoCities), ("beckett16.wav", beckett)] {
            try sox([path, "-r", "16000", "-c", "1", "-b", "16", directory + "/" + name])
            parts.append(directory + "/" + name)
        }
        try sox(parts + [output])
        let references = try WordErrorRate.librivoxReferences()
        return (LibriVox.ids.sorted().map { references[$0] ?? "" } + [twoCitiesText, beckettText]).joined(separator: " ")
    }

    static func sox(_ arguments: [String]) throws {
        try runTool(Sox.path, Sox.arguments(arguments))
    }

    /// Runs `executable` with `arguments` to its end (its stderr discarded); throws unless it exits 0.
    static func runTool(_ executable: String, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "\((executable as NSString).lastPathComponent) \(arguments.joined(separator: " ")) exited \(process.terminationStatus)"])
        }
    }
}
