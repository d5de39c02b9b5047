import Earshot
import Testing
import TestSupport

// The harness around the Apple-style listings in this target: a daemon on the embedded catalog
// (the listings install what they need through AssetInventory), the LibriVox speech, scoring.
// Nothing here is Apple code; the listings in the other files are, with only imports changed.

enum Porting {
    static let librivox = "/usr/share/pocketsphinx/test/data/librivox"
    /// The five utterances of Debian's pocketsphinx-testdata, in reading order.
    static let ids = [870, 880, 890, 920, 930].map { "sense_and_sensibility_01_austen_64kb-0\($0)" }
    static func url(_ id: String) -> URL { URL(fileURLWithPath: "\(librivox)/\(id).wav") }

    /// Whether the listings run: they need the embedded catalog with Whisper (always under CI).
    static let modelsPresent = EmbeddedModels.runs(EmbeddedModels.catalogLists("whisper-base") && EmbeddedModels.catalogLists("whisper-tiny-en"))

    /// The suite's daemon, set by ``PortingDaemonTrait``.
    @TaskLocal static var daemon: TestDaemon?

    /// Points `EarshotService.shared` (what the Apple-shaped API talks to) at the suite's daemon.
    static func useDaemon(appID: String = "com.example.porting") async throws {
        let daemon = try #require(daemon, "the suite needs the .portingDaemon trait")
        await EarshotService.shared.configure(appID: appID, socket: daemon.socket)
    }

    /// Word error rate of `hypothesis` against the references of `ids`, read in order.
    static func wer(_ hypothesis: String, ids: [String]) throws -> Double {
        let references = try WordErrorRate.librivoxReferences()
        let reference = try ids.map { try #require(references[$0]) }.joined(separator: " ")
        return WordErrorRate.rate([(reference, WordErrorRate.words(hypothesis).map { $0 == "mr" ? "mister" : $0 }.joined(separator: " "))])
    }

    /// Utterance `id` at 48 kHz stereo 16-bit (upsampled ×3 by python3's `wave`, the right channel
    /// at 80 %), in `directory`.
    static func stereo48k(_ id: String, in directory: TempDirectory) async throws -> URL {
        let script = try directory.write("to48k.py", """
        import sys, wave, array
        with wave.open(sys.argv[1], "rb") as w:
            assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (16000, 1, 2)
            x = array.array("h", w.readframes(w.getnframes()))
        out = array.array("h")
        for i, a in enumerate(x):
            b = x[i + 1] if i + 1 < len(x) else a
            for k in range(3):
                v = int(round(a + (b - a) * k / 3))
                out.append(v); out.append(int(v * 0.8))
        with wave.open(sys.argv[2], "wb") as w:
            w.setnchannels(2); w.setsampwidth(2); w.setframerate(48000)
            w.writeframes(out.tobytes())
        """)
        let path = directory.file("\(id)-48k-stereo.wav")
        let run = try await ChildProcess.run("/usr/bin/env", ["python3", script, url(id).path, path], in: directory)
        try #require(run.status == 0, "python3 could not write the 48 kHz stereo file: \(run.stderr)")
        return URL(fileURLWithPath: path)
    }
}

/// One daemon for a suite's tests, started before the first and stopped after the last.
struct PortingDaemonTrait: SuiteTrait, TestScoping {
    var isRecursive: Bool { false }

    func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        // Debug logging: tests count the frames a client's connection sent.
        let daemon = try await TestDaemon(config: "[Daemon]\nLogLevel=debug\n")
        do {
            try await Porting.$daemon.withValue(daemon) { try await function() }
        } catch {
            await daemon.cleanUp()
            throw error
        }
        await daemon.cleanUp()
    }
}

extension Trait where Self == PortingDaemonTrait {
    static var portingDaemon: Self { PortingDaemonTrait() }
}

extension Porting {
    /// Utterance `id` re-encoded by Debian's `ffmpeg` with `arguments` (codec, container) into
    /// `name` in `directory`; with `video`, a black 64×64 picture track is added.
    static func encoded(_ id: String, as name: String, _ arguments: [String], video: Bool = false, in directory: TempDirectory) async throws -> URL {
        let path = directory.file(name)
        let picture = video ? ["-f", "lavfi", "-i", "color=c=black:s=64x64:d=4", "-c:v", "mpeg4", "-shortest"] : []
        let run = try await ChildProcess.run("/usr/bin/ffmpeg", ["-loglevel", "error", "-y", "-i", url(id).path] + picture + arguments + [path], in: directory)
        try #require(run.status == 0, "ffmpeg could not write \(name): \(run.stderr)")
        return URL(fileURLWithPath: path)
    }
}
