// wyoming-latency: voice-assistant latency of Earshot's Wyoming ASR against wyoming-faster-whisper
// on the same CTranslate2 weights (issue 10, item 6); every figure beside the peer's in one run.
//
//     Benchmarks/wyoming-latency.sh [--runs N] [--models tiny.en,base] [--inference-threads N]
//
// Both servers listen on loopback TCP and get the same utterances from the same client — the PyPI
// `wyoming` package, as Home Assistant uses it (wyoming-client-worker.py) — one connection per
// utterance, audio at real-time pace; latency is from `audio-stop` to `transcript`. Utterances:
// short voice commands spoken by espeak-ng and the five LibriVox utterances. Earshot: the release
// earshotd (its default InferenceThreads or --inference-threads, `[Wyoming] Listen`) with Whisper base and tiny.en installed, the
// model chosen by `transcribe`'s name; the peer: wyoming-faster-whisper 3.8.1 with
// `--model CT2_DIR --local-files-only`, int8, 2 CPU threads, twice: at its own default beam (its
// `--beam-size 0`, "auto": 5 on x86, 1 on ARM), which the ratio is taken against as Earshot runs at
// its defaults too (beam 5 for finals), and at beam 1. wyoming-latency.sh provides the virtual
// environment and the CTranslate2 directories.
import EarshotSystem
import Foundation
import TestSupport

struct Options {
    let python, client, ct2, scratch: String
    let runs: Int
    /// Earshot's `[Analysis] InferenceThreads` (nil: the daemon's default).
    let inferenceThreads: Int?
    let models: [WhisperBenchModel]

    init(_ arguments: [String]) {
        let options = BenchmarkOptions(arguments, names: ["python", "client", "ct2", "scratch", "runs", "models", "inference-threads"], required: ["python", "client", "ct2", "scratch"],
                                       usage: "usage: wyoming-latency --python PY --client SCRIPT --ct2 DIR --scratch DIR [--runs N] [--models tiny.en,base] [--inference-threads N]")
        (python, client, ct2, scratch) = (options["python"]!, options["client"]!, options["ct2"]!, options["scratch"]!)
        runs = options.positive("runs", default: 3)
        inferenceThreads = options["inference-threads"].map { _ in options.positive("inference-threads", default: 1) }
        models = options.models
    }
}

let say = BenchmarkOutput.say
let fail = BenchmarkOutput.fail

/// Why the benchmark cannot go on.
struct BenchmarkFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// One utterance sent to both servers.
struct Utterance {
    let path, reference: String
    /// True for a LibriVox utterance, false for a synthesized command.
    let read: Bool
}

/// Short commands as a voice assistant hears them (spoken by espeak-ng, en-us, 150 words a minute).
let commands = [
    "Turn on the kitchen lights.", "Open the garage door.", "What is the weather like tomorrow?",
    "Play some jazz in the living room.", "Turn off the bedroom fan.", "Add milk to my shopping list.",
]

/// A server under test: its Wyoming URI and the `transcribe` name it gets (nil: none).
struct Server {
    let name, uri: String
    let model: String?
}

/// Latencies (ms) and (reference, text) pairs of one server on one kind of utterance.
struct Tally {
    var latencies: [Double] = []
    var pairs: [(reference: String, hypothesis: String)] = []
}

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    return sorted[max(0, Int((p * Double(sorted.count)).rounded(.up)) - 1)]
}

@main
enum WyomingLatency {
    static func main() async throws {
        let options = Options(CommandLine.arguments)
        let directory = try TempDirectory("wylat")
        defer { directory.remove() }
        guard SynthesizedSpeech.available else { fail("espeak-ng is missing: run Scripts/setup.sh") }
        let references = try WordErrorRate.librivoxReferences()
        var utterances: [Utterance] = []
        for (index, text) in commands.enumerated() {
            let path = try await SynthesizedSpeech(language: "en-us", text: text, rate: 150).wav(in: directory, name: "command-\(index).wav")
            utterances.append(Utterance(path: path, reference: text, read: false))
        }
        utterances += LibriVox.ids.map { Utterance(path: LibriVox.path($0), reference: references[$0] ?? "", read: true) }

        let load = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(separator: " ") ?? "?"
        say("wyoming-latency: \(ProcessInfo.processInfo.activeProcessorCount) CPUs, load average \(load); \(options.runs) interleaved runs, one connection per utterance, real-time pace")
        say("  client: PyPI wyoming 1.10.2; Earshot: earshotd (InferenceThreads=\(options.inferenceThreads.map(String.init) ?? "default")) over TCP; peers: wyoming-faster-whisper 3.8.1 (int8, --cpu-threads 2) at its default beam and at beam 1")
        say("  latency: audio-stop written → transcript read; utterances: \(commands.count) espeak-ng commands (22.05 kHz), \(LibriVox.ids.count) LibriVox utterances (16 kHz, 3–7 s)")

        let client = try await BlockingWork.run("client") { try LineWorker(options.python, [options.client], name: "wyoming client", awaitsReady: false) }
        let earshotPort = try LoopbackPort.free()
        let daemon = try await TestDaemon(config: (options.inferenceThreads.map { "[Analysis]\nInferenceThreads=\($0)\n" } ?? "") + "[Wyoming]\nListen=tcp://127.0.0.1:\(earshotPort)\n")
        do {
            let cli = BuiltProducts.path("earshot")
            // Whisper base serves English by default; the progressive preset installs tiny.en.
            for preset in [[], ["--preset", "progressiveTranscription"]] {
                let install = try await ChildProcess.run(cli, ["--socket", daemon.socket, "install", "--locale", "en-US", "--module", "transcriber"] + preset,
                                                         in: daemon.directory, timeout: .seconds(300))
                guard install.status == 0 || install.status == 2 else { throw BenchmarkFailure("earshot install: \(install.stderr)") }
            }
            for model in options.models {
                // The peer at its own default beam ("auto") and at beam 1, each its own server.
                var peers: [(server: Server, process: ChildProcess)] = []
                for (label, beam) in [("wyoming-faster-whisper", "0"), ("wfw beam 1", "1")] {
                    let port = try LoopbackPort.free()
                    let process = try ChildProcess(options.python, ["-m", "wyoming_faster_whisper", "--uri", "tcp://127.0.0.1:\(port)", "--model", options.ct2 + "/" + model.ct2,
                                                                    "--local-files-only", "--data-dir", directory.file("peer-data"), "--stt-library", "faster-whisper",
                                                                    "--language", "en", "--compute-type", "int8", "--beam-size", beam, "--cpu-threads", "2"],
                                                   in: directory, name: "wyoming-faster-whisper-\(model.name)-beam\(beam)")
                    peers.append((Server(name: label, uri: "tcp://127.0.0.1:\(port)", model: nil), process))
                }
                do {
                    try await compare([Server(name: "Earshot", uri: "tcp://127.0.0.1:\(earshotPort)", model: model.asset)] + peers.map(\.server),
                                      on: model, utterances: utterances, runs: options.runs, client: client, daemon: daemon)
                } catch {
                    for peer in peers { await stop(peer.process) }
                    throw BenchmarkFailure("\(error)\nwyoming-faster-whisper's log ends:\n\(peers.map { $0.process.stderr.suffix(2000) }.joined(separator: "\n"))")
                }
                for peer in peers { await stop(peer.process) }
            }
        } catch {
            await BlockingWork.run("client-stop") { client.stop() }
            await daemon.cleanUp()
            fail("\(error)")
        }
        await BlockingWork.run("client-stop") { client.stop() }
        await daemon.cleanUp()
    }

    static func stop(_ peer: ChildProcess) async {
        peer.signal(SIGTERM)
        _ = await peer.wait(timeout: .seconds(20))
        await peer.stop()
    }

    /// Sends every utterance to every one of `servers` (Earshot first, then the peers), `runs` times
    /// interleaved after one untimed each, and prints the figures with Earshot's ratio to each peer.
    static func compare(_ servers: [Server], on model: WhisperBenchModel, utterances: [Utterance], runs: Int, client: LineWorker, daemon: TestDaemon) async throws {
        for peer in servers.dropFirst() {
            let uri = peer.uri
            try await BlockingWork.run("wait") { _ = try client.ask(json: ["wait": uri]) }
        }
        func transcribe(_ utterance: Utterance, on server: Server) async throws -> (text: String, latency: Double) {
            let path = utterance.path
            return try await BlockingWork.run("transcribe") {
                let answer = try client.ask(json: ["uri": server.uri, "path": path, "name": server.model ?? NSNull()])
                guard let text = answer["text"] as? String, let latency = answer["latency_ms"] as? Double else { throw BenchmarkFailure("the client answered \(answer)") }
                return (text, latency)
            }
        }
        // Warm: one untimed utterance each (loads the models, fills caches).
        for server in servers { _ = try await transcribe(utterances[0], on: server) }
        let loadsBefore = try await TestConnection.stats(of: daemon.socket).modelLoads
        // [server][read: 1, command: 0]
        var tallies = Array(repeating: [Tally(), Tally()], count: servers.count)
        for run in 0..<runs {
            for (index, utterance) in utterances.enumerated() {
                // Alternate which server goes first, so neither always runs on a cooler machine.
                for offset in servers.indices {
                    let server = (run + index + offset) % servers.count
                    let result = try await transcribe(utterance, on: servers[server])
                    tallies[server][utterance.read ? 1 : 0].latencies.append(result.latency)
                    tallies[server][utterance.read ? 1 : 0].pairs.append((utterance.reference, result.text))
                }
            }
        }
        let stats = try await TestConnection.stats(of: daemon.socket)

        say("")
        say("Whisper \(model.name) (same CTranslate2 weights; Earshot's int8 ONNX converted from them)")
        let commandCount = utterances.filter { !$0.read }.count
        for (kind, label) in [(0, "\(commandCount) commands"), (1, "\(utterances.count - commandCount) LibriVox utterances"), (nil, "all \(utterances.count)")] as [(Int?, String)] {
            say("  \(label) × \(runs) runs")
            let merged = tallies.map { server in
                kind.map { server[$0] } ?? Tally(latencies: server[0].latencies + server[1].latencies, pairs: server[0].pairs + server[1].pairs)
            }
            for (server, tally) in zip(servers, merged) {
                say("    " + server.name.padding(toLength: 23, withPad: " ", startingAt: 0)
                    + String(format: "latency median %6.0f ms  p90 %6.0f ms   WER %5.1f %%", percentile(tally.latencies, 0.5), percentile(tally.latencies, 0.9),
                             LibriVox.wer(tally.pairs) * 100))
            }
            for (peer, tally) in zip(servers, merged).dropFirst() {
                say("    ratio Earshot / \(peer.name): " + String(format: "latency median %.2f×, p90 %.2f×",
                           percentile(merged[0].latencies, 0.5) / percentile(tally.latencies, 0.5), percentile(merged[0].latencies, 0.9) / percentile(tally.latencies, 0.9)))
            }
        }
        let served = stats.models.map(\.key).filter { $0.hasPrefix(model.asset + "@") }
        say("  earshotd: \(stats.modelLoads - loadsBefore) model loads during the timed runs; \(model.asset) loaded: \(served.joined(separator: ", "))")
        if served.isEmpty { throw BenchmarkFailure("earshotd did not serve \(model.asset): the transcribe name did not select it") }
    }
}
