import Foundation
import Testing
import TestSupport

/// Issue 28, as a person sees it: `earshot transcribe --mic` in an 80-column terminal (tmux) while
/// a PulseAudio pipe source plays three LibriVox clips at the pace of speech. The volatile text
/// wrapped and every update printed its rows again, so the screen showed the first sentence ten
/// times; now, after Ctrl-C, the transcript is on screen exactly once.
@Suite(.serialized, .enabled(if: Porting.modelsPresent && SoundServer.present && EmbeddedModels.runs(FileManager.default.isExecutableFile(atPath: "/usr/bin/tmux")),
                             "needs the embedded Whisper assets, PulseAudio and tmux (run Scripts/setup.sh)"), .portingDaemon)
struct LiveDisplayTests {
    static let tmux = "/usr/bin/tmux"
    static let clips = Array(Porting.ids.prefix(3))

    @Test func liveTranscriptOnAnEightyColumnTerminalAppearsOnce() async throws {
        let daemon = try #require(Porting.daemon)
        let sound = try await SoundServer()
        let server = "earshot-live-\(getpid())"
        /// Runs a tool to its end (reaped by ``CaptureTests/exitStatus(of:timeout:)``: Foundation's
        /// `Process` does not always notice its children end in this suite).
        func run(_ executable: String, _ arguments: [String]) async throws -> (status: Int32?, stdout: String, stderr: String) {
            let child = try ChildProcess(executable, arguments, in: sound.directory)
            let status = await CaptureTests.exitStatus(of: child, timeout: .seconds(60))
            return (status, child.stdout, child.stderr)
        }
        func tmux(_ arguments: [String]) async throws -> String {
            try await run(Self.tmux, ["-L", server, "-f", "/dev/null"] + arguments).stdout
        }
        do {
            // Installed first, so the recording call below only asks for the status.
            let install = try ChildProcess(BuiltProducts.path("earshot"), ["--socket", daemon.socket, "install", "--locale", "en-US", "--module", "transcriber"],
                                           in: sound.directory, name: "install")
            let installed = await CaptureTests.exitStatus(of: install, timeout: .seconds(300))
            #expect(installed == 0 || installed == 2, "\(install.stderr)")
            // The three clips back to back, a second apart, as one WAV for the pipe source.
            let speech = sound.directory.file("three.wav")
            let references = try WordErrorRate.librivoxReferences()
            let pause = sound.directory.file("pause.wav")
            _ = try await run(Sox.path, Sox.arguments(["-n", "-r", "16000", "-c", "1", "-b", "16", pause, "trim", "0", "1"]))
            let joined = try await run(Sox.path, Sox.arguments(Self.clips.flatMap { [Porting.url($0).path, pause] } + [speech]))
            try #require(joined.status == 0, "\(joined.stderr)")

            // A shell that Ctrl-C does not end (earshot handles SIGINT itself) writes earshot's
            // exit status to a file and keeps the pane open.
            let statusFile = sound.directory.file("earshot-status")
            _ = try await tmux(["new-session", "-d", "-s", "live", "-x", "80", "-y", "24", "-e", "PULSE_SERVER=\(sound.server)",
                                "/bin/sh", "-c", "trap '' INT; \"$0\" \"$@\"; echo \"$?\" > '\(statusFile)'; sleep 600",
                                BuiltProducts.path("earshot"), "--socket", daemon.socket, "transcribe", "--mic", "--device", SoundServer.source])
            // Recording starts once the client has connected and opened its session.
            try await Task.sleep(for: .seconds(4))
            // Ctrl-C two seconds after the speech, while silence still plays (a pipe source that
            // stops delivering leaves the recorder's read waiting: a microphone never stops).
            let feeder = try sound.feed(speech, silence: 8)
            let seconds = Double(((try? FileManager.default.attributesOfItem(atPath: speech)[.size] as? Int) ?? 0) - 44) / 32000
            try await Task.sleep(for: .seconds(seconds + 2))
            _ = try await tmux(["send-keys", "-t", "live", "C-c"])
            var status = ""
            for _ in 0..<300 where status.isEmpty {
                try await Task.sleep(for: .milliseconds(200))
                status = ((try? String(contentsOfFile: statusFile, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
            }
            let screen = try await tmux(["capture-pane", "-p", "-J", "-S", "-", "-t", "live"])
            _ = try await tmux(["kill-server"])
            _ = await CaptureTests.exitStatus(of: feeder, timeout: .seconds(30))
            print("[earshot --mic in tmux, 80 columns]\n\(screen)")
            #expect(status == "0", "earshot exited 0 after Ctrl-C: \(status) \(screen)")
            let transcript = screen
            // The first sentence (113 characters: it wraps at 80) and the others appear once each.
            for phrase in ["John Dashwood", "young man", "selfish"] {
                #expect(transcript.components(separatedBy: phrase).count - 1 == 1, "“\(phrase)”: \(transcript)")
            }
            let reference = Self.clips.compactMap { references[$0] }.joined(separator: " ")
            let wer = WordErrorRate.rate([(reference, WordErrorRate.words(transcript).map { $0 == "mr" ? "mister" : $0 }.joined(separator: " "))])
            #expect(wer <= 0.35, "WER \(wer): \(transcript)")
            // The transcript ends with a newline: its last line is a whole sentence, and the
            // terminal's echo of Ctrl-C stands on a line of its own after it.
            let lines = transcript.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            #expect(lines.last == "^C" && lines.dropLast().last?.hasSuffix(".") == true, "\(lines)")
        } catch {
            _ = try? await tmux(["kill-server"])
            await sound.stop()
            throw error
        }
        await sound.stop()
    }
}
