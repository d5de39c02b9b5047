import Earshot
import Testing
import TestSupport

/// Microphone capture on a real PulseAudio server whose virtual source plays LibriVox speech at
/// the pace of speech: the words come out, and stopping keeps the last of them.
@Suite(.serialized, .enabled(if: Porting.modelsPresent && SoundServer.present, "needs the embedded Whisper assets and PulseAudio (run Scripts/setup.sh)"), .portingDaemon)
struct CaptureTests {
    static let id = Porting.ids[4] // "he might even have been made amiable himself" (3.3 s)

    /// The article's capture setup against the default source (`PULSE_SOURCE`); the "stop
    /// button" is pressed a second after the speech ends, while silence still plays.
    @Test func captureInputSequenceProviderTranscribesTheMicrophone() async throws {
        try await Porting.useDaemon()
        let sound = try await SoundServer()
        defer { Task { await sound.stop() } }
        setenv("PULSE_SERVER", sound.server, 1)
        setenv("PULSE_SOURCE", SoundServer.source, 1)
        let path = Porting.url(Self.id).path
        let feeder = FeederBox()
        let text = try await transcribeMicrophone(locale: Locale(identifier: "en-US")) {
            try? await Task.sleep(for: .seconds(1)) // the record stream is connected by now
            feeder.process = try? sound.feed(path, silence: 4)
            try? await Task.sleep(for: .seconds(3.3 + 1.2))
        }
        _ = await feeder.process?.wait()
        print("[microphone] \(text)")
        #expect(WordErrorRate.words(text).last == "himself", "\(text)")
        #expect(try Porting.wer(text, ids: [Self.id]) <= 0.35, "\(text)")
    }

    /// `earshot transcribe --mic --device SOURCE`; Ctrl-C (SIGINT) finalizes and prints the words
    /// said so far, the last one included.
    @Test func earshotTranscribeMicStopsOnInterrupt() async throws {
        let daemon = try #require(Porting.daemon)
        let sound = try await SoundServer()
        defer { Task { await sound.stop() } }
        let cli = try ChildProcess(BuiltProducts.path("earshot"), ["--socket", daemon.socket, "transcribe", "--mic", "--device", SoundServer.source],
                                   environment: ["PULSE_SERVER": sound.server], in: sound.directory, name: "mic")
        try await Task.sleep(for: .seconds(4)) // installs what is missing, then records
        let feeder = try sound.feed(Porting.url(Self.id).path, silence: 4)
        try await Task.sleep(for: .seconds(3.3 + 1.2))
        cli.signal(SIGINT)
        let status = await Self.exitStatus(of: cli, timeout: .seconds(60))
        _ = await feeder.wait()
        print("[earshot --mic] \(cli.stdout)")
        #expect(status == 0, "\(cli.stderr)")
        #expect(WordErrorRate.words(cli.stdout).last == "himself", "\(cli.stdout) \(cli.stderr)")
    }
}

extension CaptureTests {
    /// `child`'s exit status once it exits (nil after `timeout`). Reaps it itself as well:
    /// Foundation's `Process` did not notice this child's exit here (it stayed a zombie while
    /// `isRunning` said true).
    static func exitStatus(of child: ChildProcess, timeout: Duration) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            var status: Int32 = 0
            if waitpid(child.pid, &status, WNOHANG) == child.pid { return (status >> 8) & 0xff }
            if !child.process.isRunning { return child.process.terminationStatus }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }
}

/// The feeding process, set from the stop closure.
final class FeederBox: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: ChildProcess?
    var process: ChildProcess? {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}
