// vs-peers: Earshot against its peers on the same CTranslate2 weights (issues 10 and 29), all warm,
// interleaved, 2 threads each; every figure beside its baselines in one run.
//
//     Benchmarks/vs-peers.sh [--runs N] [--repeats N] [--sentences N] [--models tiny.en,base] [--inference-threads N]
//                            [--analysis KEY=VALUE,…] [--baseline-earshotd PATH] [--baseline-analysis KEY=VALUE,…]
//                            [--unprompted] [--texts DIR] [--sets KEY,…] [--earshot-only]
//
// --analysis sets [Analysis] keys of Earshot's daemon (e.g. RecordingWindowSec=0,BatchThreads=0).
// --sets runs only the sets named (utterances, readings, sonnet, synthetic, recording);
// --earshot-only runs no peers (Earshot against its baseline, or alone).
// --baseline-earshotd (another build, e.g. main's) and/or --baseline-analysis (other [Analysis]
// keys for the same build) add another engine, for ratios before/after a change in the same run.
// --unprompted adds faster-whisper without its prompt (condition_on_previous_text=False, on the
// same worker): how much of its WER on the long recording comes from decoding each window with the
// text before it. --texts writes every engine's text of every file set into DIR
// (ENGINE-MODEL-SET.txt), for reading the errors behind a WER.
//
// Earshot: the release earshotd (its default InferenceThreads, or --inference-threads) on a catalog
// holding one Whisper asset (the embedded one, re-signed with a throwaway key), and one
// `earshot transcribe FILE` per file. faster-whisper: one warm worker process
// (faster-whisper-worker.py; int8) at its defaults (beam 5, condition_on_previous_text) and at
// beam 1, and another in float32 at its defaults (the float reference pipeline). whisper.cpp: one
// warm worker (whisper-cpp-worker.py, the pywhispercpp wheel's libwhisper) on a ggml file of the
// same weights in float16, as its command line decodes (beam 5). Time is wall time per file set;
// CPU seconds are the daemon's (with its engine process's) plus the CLI's, and each worker's
// (/proc, getrusage); peak RSS is each model holder's VmHWM (earshotd's and its engine process's
// added up). vs-peers.sh provides the virtual environment, the CTranslate2 and ggml models and
// the sonnet.
import EarshotSystem
import EarshotWire
import Foundation
import TestSupport

struct Options {
    let python, worker, whisperCppWorker, ct2, ggml, sonnet, scratch: String
    let runs, repeats: Int
    /// Synthesized sentences (nil: all).
    let sentences: Int?
    /// Earshot's `[Analysis] InferenceThreads` (nil: the daemon's default).
    let inferenceThreads: Int?
    let models: [WhisperBenchModel]
    /// `[Analysis]` lines for Earshot's daemon, and for the baseline's.
    let analysis: [String]
    let baselineAnalysis: [String]?
    /// Another earshotd build to run beside this one (before/after comparisons).
    let baseline: String?
    /// Also run faster-whisper without its prompt (`condition_on_previous_text=False`).
    let unprompted: Bool
    /// Where to write each engine's texts, if anywhere.
    let texts: String?
    /// The sets to run (their keys); nil: all.
    let sets: [String]?
    /// Run Earshot (and its baseline) only, no peers.
    let earshotOnly: Bool

    init(_ arguments: [String]) {
        let options = BenchmarkOptions(arguments, names: ["python", "worker", "whisper-cpp-worker", "ct2", "ggml", "sonnet", "scratch", "runs", "repeats", "sentences", "models",
                                                          "inference-threads", "analysis", "baseline-earshotd", "baseline-analysis", "texts", "sets"],
                                       flags: ["unprompted", "earshot-only"],
                                       required: ["python", "worker", "whisper-cpp-worker", "ct2", "ggml", "sonnet", "scratch"],
                                       usage: "usage: vs-peers --python PY --worker SCRIPT --whisper-cpp-worker SCRIPT --ct2 DIR --ggml DIR --sonnet DIR --scratch DIR [--runs N] [--repeats N] [--sentences N] [--models tiny.en,base] [--inference-threads N] [--analysis KEY=VALUE,…] [--baseline-earshotd PATH] [--baseline-analysis KEY=VALUE,…] [--unprompted] [--texts DIR] [--sets KEY,…] [--earshot-only]")
        (python, worker, whisperCppWorker) = (options["python"]!, options["worker"]!, options["whisper-cpp-worker"]!)
        (ct2, ggml, sonnet, scratch) = (options["ct2"]!, options["ggml"]!, options["sonnet"]!, options["scratch"]!)
        runs = options.positive("runs", default: 3)
        repeats = options.positive("repeats", default: 13)
        sentences = options["sentences"].map { _ in options.positive("sentences", default: 1) }
        inferenceThreads = options["inference-threads"].map { _ in options.positive("inference-threads", default: 1) }
        models = options.models
        baseline = options["baseline-earshotd"]
        unprompted = options.flag("unprompted")
        texts = options["texts"]
        sets = options["sets"].map { $0.split(separator: ",").map(String.init) }
        earshotOnly = options.flag("earshot-only")
        func lines(_ name: String) -> [String]? {
            options[name].map { value in
                value.split(separator: ",").map { pair in
                    guard pair.contains("="), !pair.hasPrefix("=") else { fail("--\(name) takes KEY=VALUE pairs separated by commas, not '\(pair)'") }
                    return String(pair)
                }
            }
        }
        analysis = lines("analysis") ?? []
        baselineAnalysis = lines("baseline-analysis")
    }
}

let say = BenchmarkOutput.say
let fail = BenchmarkOutput.fail

let embeddedCatalog = "/usr/local/share/earshot/catalog/catalog.json"

/// CPU seconds (user + system) a running process has used, from `/proc/PID/stat`, with those of
/// its children, running (earshotd's engine process, which decodes) or waited for.
func cpuSeconds(_ pid: Int32) -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return 0 }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    let ticks = fields[11...14].reduce(0) { $0 + (Int($1) ?? 0) }
    return Double(ticks) / Double(sysconf(Int32(_SC_CLK_TCK))) + ProcessMemory.children(of: pid).reduce(0) { $0 + cpuSeconds($1) }
}

/// CPU seconds of this process's waited-for children (the CLI runs).
func childrenCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_CHILDREN.rawValue, &usage)
    func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

func elapsed(since start: ContinuousClock.Instant) -> Double {
    let d = ContinuousClock.now - start
    return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
}

/// The embedded catalog with `model`'s Whisper asset as the only one, signed with a key made for
/// this run; returns the catalog URL and the keys directory.
func singleModelCatalog(_ model: WhisperBenchModel, in directory: TempDirectory) async throws -> (url: String, keys: String) {
    guard let data = FileManager.default.contents(atPath: embeddedCatalog),
          var catalog = try JSONSerialization.jsonObject(with: data) as? [String: Any],
          let assets = catalog["assets"] as? [[String: Any]] else { fail("no embedded catalog at \(embeddedCatalog): run Scripts/setup.sh") }
    catalog["assets"] = assets.filter { ($0["id"] as? String).map { !$0.hasPrefix("whisper-") || $0 == model.asset } ?? false }
    guard (catalog["assets"] as? [[String: Any]])?.contains(where: { $0["id"] as? String == model.asset }) == true else {
        fail("the embedded catalog has no \(model.asset): run Scripts/setup.sh")
    }
    let path = directory.file("catalog-\(model.name).json")
    try JSONSerialization.data(withJSONObject: catalog, options: [.prettyPrinted, .sortedKeys]).write(to: URL(fileURLWithPath: path))
    let keys = directory.file("keys-\(model.name)")
    try FileManager.default.createDirectory(atPath: keys, withIntermediateDirectories: true)
    for arguments in [["-G", "-W", "-f", "-p", keys + "/bench.pub", "-s", directory.file("bench-\(model.name).key")],
                      ["-S", "-s", directory.file("bench-\(model.name).key"), "-m", path]] {
        let run = try await ChildProcess.run("/usr/bin/minisign", arguments, in: directory)
        guard run.status == 0 else { fail("minisign \(arguments[0]): \(run.stderr)") }
    }
    return ("file://" + path, keys)
}

/// One engine's figures for one file set, over the runs.
struct Tally {
    var times: [Double] = []
    var cpu: [Double] = []
    var text: [String] = []
}

func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

/// Something that transcribes a file set: wall seconds, CPU seconds, one text per file.
struct Engine {
    let name: String
    /// The process holding the model (peak RSS).
    let pid: Int32
    let run: ([String]) async throws -> (seconds: Double, cpu: Double, text: [String])
}

/// A file set: its short key (for --texts), what it is, its files and their references.
struct FileSet {
    let key: String
    let name: String
    let files: [EvaluationSets.File]
    var words: Int { files.map { WordErrorRate.words($0.reference).count }.reduce(0, +) }
}

@main
enum VsPeers {
    static func main() async throws {
        let options = Options(CommandLine.arguments)
        let directory = try TempDirectory("vspeers")
        defer { directory.remove() }
        let longPath = options.scratch + "/librivox-\(options.repeats)x.wav"
        let longReference = try LibriVox.writeRecording(to: longPath, repeats: options.repeats, silence: 0.5)
        let references = try WordErrorRate.librivoxReferences()
        let speech = options.scratch + "/licence-speech"
        try FileManager.default.createDirectory(atPath: speech, withIntermediateDirectories: true)
        let synthetic = try EvaluationSets.synthetic(in: speech, count: options.sentences ?? Int.max)
        let sentences = synthetic.map { $0.reference }.joined(separator: " ").filter { ".;:".contains($0) }.count
        let minutes = Double((try FileManager.default.attributesOfItem(atPath: longPath)[.size] as? Int ?? 44) - 44) / 32000 / 60
        let allSets = [
            FileSet(key: "utterances", name: "5 LibriVox utterances (3–7 s, one call each)",
                    files: LibriVox.ids.map { EvaluationSets.File(path: LibriVox.path($0), reference: references[$0] ?? "") }),
            FileSet(key: "readings", name: "2 other readers (Dickens 44 s, Beckett 10 s)", files: try EvaluationSets.readings(in: options.scratch)),
            FileSet(key: "sonnet", name: "Shakespeare's Sonnet I (LibriVox, 53 s)", files: try EvaluationSets.sonnet(in: options.sonnet)),
            FileSet(key: "synthetic", name: "espeak-ng: \(sentences) licence sentences in \(synthetic.count) files", files: synthetic),
            FileSet(key: "recording", name: String(format: "%.1f min recording (the utterances %d×, 0.5 s gaps)", minutes, options.repeats),
                    files: [EvaluationSets.File(path: longPath, reference: longReference)]),
        ]
        let sets = allSets.filter { options.sets?.contains($0.key) ?? true }
        if let asked = options.sets, sets.count != asked.count {
            fail("--sets takes keys among \(allSets.map(\.key).joined(separator: ", ")), not \(asked.joined(separator: ","))")
        }
        let load = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(separator: " ") ?? "?"
        say("vs-peers: \(ProcessInfo.processInfo.activeProcessorCount) CPUs, load average \(load); 2 threads each, warm, interleaved, median of \(options.runs)")
        say("  faster-whisper 1.2.1: int8 at its defaults (beam 5, previous text as prompt) and at beam 1, float32 at its defaults (float reference); whisper.cpp (pywhispercpp 1.5.1): float16 ggml, beam 5")
        say("  Earshot: earshotd (InferenceThreads=\(options.inferenceThreads.map(String.init) ?? "default")\(options.analysis.map { ", " + $0 }.joined())) + `earshot transcribe FILE` per file")
        if let baseline = options.baselineAnalysis { say("  Earshot baseline: [Analysis] \(baseline.joined(separator: ", "))") }
        let cli = BuiltProducts.path("earshot")

        for model in options.models {
            let catalog = try await singleModelCatalog(model, in: directory)
            // With base on the long file under load, `earshot transcribe` went 30 s without reading
            // its output while its upload waited on the daemon's back-pressure, and the daemon
            // dropped it (OutputStallTimeoutSec): allow longer, to measure the CLI as it is.
            func config(_ analysis: [String]) -> String {
                "[Analysis]\n" + (options.inferenceThreads.map { "InferenceThreads=\($0)\n" } ?? "") + analysis.map { $0 + "\n" }.joined()
                    + "[Limits]\nOutputStallTimeoutSec=600\n"
            }
            var engines: [Engine] = []
            var daemons: [TestDaemon] = []
            let hasBaseline = options.baseline != nil || options.baselineAnalysis != nil
            for (label, executable, analysis) in [("Earshot", nil, options.analysis)] + (hasBaseline ? [("Earshot baseline", options.baseline, options.baselineAnalysis ?? options.analysis)] : []) {
                let daemon = try await TestDaemon(config: config(analysis), arguments: ["--catalog", catalog.url, "--keys-dir", catalog.keys], executable: executable)
                let install = try await ChildProcess.run(cli, ["--socket", daemon.socket, "install", "--locale", "en-US", "--module", "transcriber"], in: daemon.directory, timeout: .seconds(300))
                guard install.status == 0 || install.status == 2 else { fail("earshot install: \(install.stderr)") }
                daemons.append(daemon)
                engines.append(Engine(name: label, pid: daemon.child.pid) { files in
                    let cpu0 = cpuSeconds(daemon.child.pid) + childrenCPUSeconds()
                    let start = ContinuousClock.now
                    var texts: [String] = []
                    for file in files {
                        let run = try await ChildProcess.run(cli, ["--socket", daemon.socket, "transcribe", file], in: daemon.directory, timeout: .seconds(900))
                        guard run.status == 0 else { fail("earshot transcribe \(file): \(run.stderr)") }
                        texts.append(run.stdout)
                    }
                    return (elapsed(since: start), cpuSeconds(daemon.child.pid) + childrenCPUSeconds() - cpu0, texts)
                })
            }
            let peers = engines.count
            // Warm workers holding the model, answering {"text": …} per path.
            func worker(_ name: String, _ arguments: [String]) async throws -> LineWorker {
                try await BlockingWork.run("worker") { try LineWorker(options.python, arguments, name: name, awaitsReady: true) }
            }
            func peer(_ name: String, _ worker: LineWorker, _ request: [String: Any]) -> Engine {
                let request = Request(fields: request)
                return Engine(name: name, pid: worker.pid) { files in
                    try await BlockingWork.run(name) {
                        let cpu0 = cpuSeconds(worker.pid)
                        let start = ContinuousClock.now
                        let texts = try files.map { try worker.ask(json: request.fields.merging(["path": $0]) { $1 })["text"] as? String ?? "" }
                        return (elapsed(since: start), cpuSeconds(worker.pid) - cpu0, texts)
                    }
                }
            }
            var workers: [LineWorker] = []
            if !options.earshotOnly {
                let int8 = try await worker("faster-whisper", [options.worker, options.ct2 + "/" + model.ct2, "2"])
                let float = try await worker("faster-whisper float32", [options.worker, options.ct2 + "/" + model.ct2, "2", "float32"])
                let whisperCpp = try await worker("whisper.cpp", [options.whisperCppWorker, options.ggml + "/" + model.ct2 + ".bin", "2"])
                workers = [int8, float, whisperCpp]
                // faster-whisper at its defaults (beam 5, each window prompted with the text before
                // it), at beam 1, (--unprompted) at beam 5 without the prompt, and in float32; whisper.cpp.
                engines.append(peer("faster-whisper", int8, ["prompted": true, "beam": 5]))
                engines.append(peer("fw beam 1", int8, ["prompted": true, "beam": 1]))
                if options.unprompted { engines.append(peer("fw unprompted", int8, ["prompted": false, "beam": 5])) }
                engines.append(peer("fw float32", float, ["prompted": true, "beam": 5]))
                engines.append(peer("whisper.cpp", whisperCpp, [:]))
            }

            // Warm-up: one untimed call each.
            for engine in engines { _ = try await engine.run([sets[0].files[0].path]) }
            let loadsBefore = try await TestConnection.stats(of: daemons[0].socket).modelLoads
            var tallies = Array(repeating: Array(repeating: Tally(), count: engines.count), count: sets.count)
            for run in 0..<options.runs {
                for (index, set) in sets.enumerated() {
                    // Rotate which goes first, so none always runs on a cooler machine.
                    for offset in engines.indices {
                        let engine = (run + offset) % engines.count
                        let result = try await engines[engine].run(set.files.map(\.path))
                        tallies[index][engine].times.append(result.seconds)
                        tallies[index][engine].cpu.append(result.cpu)
                        tallies[index][engine].text = result.text
                    }
                }
            }
            let loads = try await TestConnection.stats(of: daemons[0].socket).modelLoads - loadsBefore
            let calls = options.runs * sets.map(\.files.count).reduce(0, +)
            let peaks = engines.map { ProcessMemory(pid: $0.pid).treePeak }
            let running = workers
            await BlockingWork.run("worker-stop") { running.forEach { $0.stop() } }
            for daemon in daemons { await daemon.cleanUp() }

            say("")
            say("Whisper \(model.name) (same CTranslate2 weights; Earshot's int8 ONNX and whisper.cpp's float16 ggml converted from them)")
            var errors = Array(repeating: 0, count: engines.count), words = 0
            for (set, tally) in zip(sets, tallies) {
                say("  \(set.name), \(set.words) words")
                for (index, t) in tally.enumerated() {
                    let pairs = Array(zip(set.files.map(\.reference), t.text))
                    errors[index] += pairs.map { WordErrorRate.errors(reference: WordErrorRate.words($0.0), hypothesis: LibriVox.words($0.1)) }.reduce(0, +)
                    say("    " + engines[index].name.padding(toLength: 17, withPad: " ", startingAt: 0) + String(format: "%7.2f s wall  %7.2f s CPU  WER %5.1f %%  peak RSS %4.0f MiB   runs: %@", median(t.times), median(t.cpu),
                               LibriVox.wer(pairs) * 100, Double(peaks[index]) / 1048576, t.times.map { String(format: "%.2f", $0) }.joined(separator: " ")))
                }
                words += set.words
                // Ratios of the same round (the engines ran back to back), median over the rounds.
                for other in 1..<engines.count where other >= peers || hasBaseline {
                    say("    ratio Earshot / \(engines[other].name): " + String(format: "time %.2f×, CPU %.2f×", median(zip(tally[0].times, tally[other].times).map(/)),
                                                                                median(zip(tally[0].cpu, tally[other].cpu).map(/))))
                }
            }
            say("  all sets, \(words) words: " + engines.indices.map { String(format: "%@ %.1f %%", engines[$0].name, Double(errors[$0]) / Double(words) * 100) }.joined(separator: ", "))
            if let folder = options.texts {
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                for (set, tally) in zip(sets, tallies) {
                    for (engine, t) in zip(engines, tally) {
                        let name = engine.name.lowercased().replacingOccurrences(of: " ", with: "-")
                        try (t.text.joined(separator: "\n") + "\n").write(toFile: "\(folder)/\(name)-\(model.name)-\(set.key).txt", atomically: true, encoding: .utf8)
                    }
                }
                say("  texts: \(folder)")
            }
            say("  earshotd model loads during the \(calls) timed calls: \(loads) (peak RSS: over the whole run, loads included)")
        }
    }
}

/// A worker request's fields (sendable across the blocking hop: JSON values only).
struct Request: @unchecked Sendable {
    // @unchecked: JSON scalars, never mutated.
    let fields: [String: Any]
}
