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
        let sound = try await SoundServer.started()
        defer { Task { await sound.stop() } }
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
        // Installed first, so the recording call below only asks for the status.
        let install = try ChildProcess(BuiltProducts.path("earshot"), ["--socket", daemon.socket, "install", "--locale", "en-US", "--module", "transcriber"],
                                       in: sound.directory, name: "install")
        let installed = await Self.exitStatus(of: install, timeout: .seconds(300))
        #expect(installed == 0 || installed == 2, "\(install.stderr)")
        let cli = try ChildProcess(BuiltProducts.path("earshot"), ["--socket", daemon.socket, "transcribe", "--mic", "--device", SoundServer.source],
                                   environment: ["PULSE_SERVER": sound.server], in: sound.directory, name: "mic")
        try await Task.sleep(for: .seconds(4)) // connects, then records
        let feeder = try sound.feed(Porting.url(Self.id).path, silence: 4)
        try await Task.sleep(for: .seconds(3.3 + 1.2))
        cli.signal(SIGINT)
        let status = await Self.exitStatus(of: cli, timeout: .seconds(60))
        _ = await feeder.wait()
        print("[earshot --mic] \(cli.stdout)")
        #expect(status == 0, "\(cli.stderr)")
        #expect(WordErrorRate.words(cli.stdout).last == "himself", "\(cli.stdout) \(cli.stderr)")
        // Issue 10 item 4 for the microphone: one connection, one hello, one status query.
        let connections = try await daemon.framesReceived(fromPID: cli.pid)
        #expect(connections.count == 1 && connections.first?["earshot.hello"] == 1 && connections.first?["earshot.module-status"] == 1
                && connections.first?["earshot.install"] == nil, "\(connections)")
    }
}

extension CaptureTests {
    /// Found while testing issue 28 in tmux: Ctrl-C after the source had stopped delivering audio
    /// (a pipe source whose writer ended) never ended `earshot transcribe --mic`: the recorder's
    /// read waited for audio that never came. Now the input ends half a second after the stop.
    @Test func interruptEndsTheMicrophoneEvenWhenTheSourceStoppedDelivering() async throws {
        let daemon = try #require(Porting.daemon)
        let sound = try await SoundServer()
        defer { Task { await sound.stop() } }
        let install = try ChildProcess(BuiltProducts.path("earshot"), ["--socket", daemon.socket, "install", "--locale", "en-US", "--module", "transcriber"],
                                       in: sound.directory, name: "install")
        _ = await Self.exitStatus(of: install, timeout: .seconds(300))
        let cli = try ChildProcess(BuiltProducts.path("earshot"), ["--socket", daemon.socket, "transcribe", "--mic", "--device", SoundServer.source],
                                   environment: ["PULSE_SERVER": sound.server], in: sound.directory, name: "mic-stalled")
        try await Task.sleep(for: .seconds(4)) // connects, then records
        let feeder = try sound.feed(Porting.url(Self.id).path, silence: 1)
        _ = await Self.exitStatus(of: feeder, timeout: .seconds(30))
        // The source delivers nothing any more; the recorder's read waits.
        try await Task.sleep(for: .seconds(1))
        cli.signal(SIGINT)
        let status = await Self.exitStatus(of: cli, timeout: .seconds(20))
        #expect(status == 0, "earshot ended after Ctrl-C: \(String(describing: status)) \(cli.stderr)")
        #expect(WordErrorRate.words(cli.stdout).last == "himself", "\(cli.stdout) \(cli.stderr)")
        if status == nil { cli.signal(SIGKILL) }
    }

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

/// Choosing the microphone: the sound server's sources are listed (discovery, the Linux listing
/// and `earshot devices`), on a real PulseAudio server with two sources.
@Suite(.serialized, .enabled(if: SoundServer.present, "needs PulseAudio (run Scripts/setup.sh)"))
struct DeviceSelectionTests {
    @Test func soundServerSourcesAreListed() async throws {
        let sound = try await SoundServer.started()
        defer { Task { await sound.stop() } }
        let discovered = AVCaptureDevice.DiscoverySession(deviceTypes: [.microphone], mediaType: .audio, position: .unspecified).devices
        #expect(Set(discovered.map(\.uniqueID)) == [SoundServer.source, SoundServer.quietSource], "\(discovered.map(\.uniqueID))")
        let all = try await AVCaptureDevice.soundServerDevices()
        #expect(all.filter(\.isSoundServerDefault).map(\.uniqueID) == [SoundServer.source])
        #expect(all.contains { $0.uniqueID == SoundServer.quietSource && !$0.isMonitor })

        // Reaped by `exitStatus(of:timeout:)`: Foundation's `Process` misses exits here.
        let cli = try ChildProcess(BuiltProducts.path("earshot"), ["devices", "--json"], environment: ["PULSE_SERVER": sound.server], in: sound.directory)
        #expect(await CaptureTests.exitStatus(of: cli, timeout: .seconds(30)) == 0, "\(cli.stderr)")
        let listed = try JSONSerialization.jsonObject(with: Data(cli.stdout.utf8)) as? [[String: Any]] ?? []
        #expect(Set(listed.compactMap { $0["name"] as? String }) == [SoundServer.source, SoundServer.quietSource], "\(cli.stdout)")
        #expect(listed.filter { $0["default"] as? Bool == true }.compactMap { $0["name"] as? String } == [SoundServer.source], "\(cli.stdout)")
    }

    /// Regression: every client process linked libpulse and the 18 libraries it needs (D-Bus,
    /// X11/xcb, libsystemd, libgcrypt, …), ~2.6 ms of every `earshot` start, though only
    /// recording and listing sources use them. Now they are opened when a client first does
    /// (glibc's `LD_DEBUG=files` names every library a process loads, and says how).
    @Test func aClientLoadsLibpulseOnlyToListOrRecord() async throws {
        let sound = try await SoundServer.started()
        defer { Task { await sound.stop() } }
        let version = try ChildProcess(BuiltProducts.path("earshot"), ["--version"], environment: ["LD_DEBUG": "files"], in: sound.directory)
        #expect(await CaptureTests.exitStatus(of: version, timeout: .seconds(30)) == 0, "\(version.stderr.suffix(2000))")
        #expect(version.stderr.contains("file=libsndfile.so.1"), "LD_DEBUG=files printed nothing: \(version.stderr.suffix(500))")
        #expect(!version.stderr.contains("file=libpulse"), "earshot --version loaded libpulse")

        let devices = try ChildProcess(BuiltProducts.path("earshot"), ["devices", "--json"], environment: ["PULSE_SERVER": sound.server, "LD_DEBUG": "files"],
                                       in: sound.directory)
        #expect(await CaptureTests.exitStatus(of: devices, timeout: .seconds(30)) == 0, "\(devices.stderr.suffix(2000))")
        let opened = devices.stderr.split(separator: "\n").filter { $0.contains("file=libpulse-simple.so.0") && $0.contains("[0];") }
        #expect(opened.contains { $0.contains("dynamically loaded") }, "\(opened)")
        #expect(devices.stdout.contains(SoundServer.source), "\(devices.stdout)")
    }

    /// A server that accepts the connection and never answers makes the listing fail (after
    /// `SoundServerSources.timeout`) instead of hanging.
    @Test func aServerThatNeverAnswersIsAnErrorNotAHang() async throws {
        let directory = try TempDirectory("esmute")
        defer { directory.remove() }
        let socket = directory.file("native")
        let script = try directory.write("mute.py", """
        import socket, sys, time
        s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(4)
        held = [s.accept() for _ in range(4)]
        time.sleep(600)
        """)
        let server = try ChildProcess("/usr/bin/env", ["python3", script, socket], in: directory, name: "mute")
        defer { Task { await server.stop() } }
        try await TestDaemon.waitForSocket(socket, process: server)
        let cli = try ChildProcess(BuiltProducts.path("earshot"), ["devices"], environment: ["PULSE_SERVER": "unix:" + socket], in: directory)
        #expect(await CaptureTests.exitStatus(of: cli, timeout: .seconds(30)) == 1)
        #expect(cli.stderr.contains("no answer within"), "\(cli.stderr)")
    }
}

/// Choosing the microphone by name: the named source is the one recorded.
extension CaptureTests {
    /// An en-US transcriber with its assets installed, on the porting daemon.
    static func installedTranscriber() async throws -> SpeechTranscriber {
        try await Porting.useDaemon()
        let transcriber = SpeechTranscriber(locale: Locale(identifier: "en-US"), preset: .transcription)
        try await ensureAssets(for: transcriber)
        return transcriber
    }

    /// The named source is recorded: `quiet` gives digital silence while `librivox` plays speech.
    @Test func aNamedSourceIsTheOneRecorded() async throws {
        let transcriber = try await Self.installedTranscriber()
        let sound = try await SoundServer.started()
        defer { Task { await sound.stop() } }
        let feeder = try sound.feed(Porting.url(Porting.ids[4]).path, silence: 0)
        defer { Task { await feeder.stop() } }
        var peaks: [String: Float] = [:]
        for name in [SoundServer.quietSource, SoundServer.source] {
            let session = AVCaptureSession()
            session.startRunning()
            let provider = try await CaptureInputSequenceProvider.provider(from: try #require(AVCaptureDevice(uniqueID: name)), in: session, compatibleWith: [transcriber])
            var peak: Float = 0
            var chunks = 0
            for try await input in provider.analyzerInputs {
                let buffer = input.buffer
                let samples = UnsafeBufferPointer(start: buffer.int16ChannelData![0], count: Int(buffer.frameLength))
                peak = max(peak, samples.map { abs(Float($0)) / 32768 }.max() ?? 0)
                chunks += 1
                if chunks == 10 { session.stopRunning() } // 1 s
            }
            peaks[name] = peak
        }
        #expect(peaks[SoundServer.quietSource] == 0, "\(peaks)")
        #expect((peaks[SoundServer.source] ?? 0) > 0.05, "\(peaks)")
    }

    @Test func anUnknownSourceIsAClearError() async throws {
        let transcriber = try await Self.installedTranscriber()
        let sound = try await SoundServer.started()
        defer { Task { await sound.stop() } }
        let provider = try await CaptureInputSequenceProvider.providerWithSession(from: try #require(AVCaptureDevice(uniqueID: "no-such-source")), compatibleWith: [transcriber])
        await #expect { for try await _ in provider.analyzerInputs {} } throws: { error in
            "\(error)".contains("no-such-source")
        }
    }
}
