import Foundation
import Testing
import TestSupport

/// A real PulseAudio server on a private socket with a virtual source `librivox` that plays
/// whatever `feed` writes into its pipe (the default source: the microphone for the capture
/// tests), and a second, silent one, `quiet`, to choose between.
final class SoundServer: Sendable {
    static let executable = "/usr/bin/pulseaudio"
    /// Whether the capture tests run (always under CI, where setup installs PulseAudio).
    static let present = EmbeddedModels.runs(FileManager.default.isExecutableFile(atPath: executable))
    static let source = "librivox"
    static let quietSource = "quiet"

    let directory: TempDirectory
    let child: ChildProcess
    /// `PULSE_SERVER` for clients.
    let server: String
    private let fifo: String

    init() async throws {
        directory = try TempDirectory("espulse")
        let socket = directory.file("native")
        fifo = directory.file("fifo")
        let config = try directory.write("default.pa", """
        load-module module-native-protocol-unix socket=\(socket) auth-anonymous=1
        load-module module-pipe-source source_name=\(Self.source) file=\(fifo) format=s16le rate=16000 channels=1
        load-module module-null-source source_name=\(Self.quietSource)
        set-default-source \(Self.source)
        """)
        child = try ChildProcess(Self.executable, ["-n", "-F", config, "--daemonize=no", "--exit-idle-time=-1", "--use-pid-file=no", "--log-target=stderr"],
                                 environment: ["HOME": directory.path, "XDG_RUNTIME_DIR": directory.path], in: directory)
        server = "unix:" + socket
        try await TestDaemon.waitForSocket(socket, process: child)
    }

    /// Starts a server and points this process's sound clients at it (`PULSE_SERVER`).
    static func started() async throws -> SoundServer {
        let sound = try await SoundServer()
        setenv("PULSE_SERVER", sound.server, 1)
        return sound
    }

    /// Plays utterance file `path` (16 kHz mono WAV) into the source at the pace of speech, then
    /// `silence` seconds of silence; returns the feeding process.
    func feed(_ path: String, silence: Double) throws -> ChildProcess {
        let script = try directory.write("feed.py", """
        import sys, time, wave
        fifo, path, silence = sys.argv[1], sys.argv[2], float(sys.argv[3])
        with wave.open(path, "rb") as w:
            pcm = w.readframes(w.getnframes())
        chunk = 3200  # 0.1 s of s16le at 16 kHz
        with open(fifo, "wb", buffering=0) as out:
            for i in range(0, len(pcm), chunk):
                out.write(pcm[i:i + chunk]); time.sleep(0.1)
            for _ in range(int(silence * 10)):
                out.write(b"\\0" * chunk); time.sleep(0.1)
        """)
        return try ChildProcess("/usr/bin/env", ["python3", script, fifo, path, "\(silence)"], in: directory, name: "feed")
    }

    func stop() async {
        await child.stop()
        directory.remove()
    }
}
