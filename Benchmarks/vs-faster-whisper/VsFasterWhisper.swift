// vs-faster-whisper: Earshot against faster-whisper on the same CTranslate2 weights (issue 10,
// item 5), both warm, interleaved, 2 threads each; every figure beside its baseline in one run.
//
//     Benchmarks/vs-faster-whisper.sh [--runs N] [--repeats N] [--models tiny.en,base] [--inference-threads N]
//                                     [--analysis KEY=VALUE,…] [--baseline-earshotd PATH] [--baseline-analysis KEY=VALUE,…]
//                                     [--unprompted] [--texts DIR]
//
// --analysis sets [Analysis] keys of Earshot's daemon (e.g. RecordingWindowSec=0,BatchThreads=0).
// --baseline-earshotd (another build, e.g. main's) and/or --baseline-analysis (other [Analysis]
// keys for the same build) add a third engine, for ratios before/after a change in the same run.
// --unprompted adds faster-whisper without its prompt (condition_on_previous_text=False, on the
// same worker): how much of its WER on the long recording comes from decoding each window with the
// text before it, which Earshot's windows do not have. --texts writes every engine's text of every
// file set into DIR (ENGINE-MODEL-SET.txt), for reading the errors behind a WER.
//
// Earshot: the release earshotd (its default InferenceThreads, or --inference-threads; a recording's
// segments decode two at a time on 2 cores either way) on a catalog holding one Whisper asset (the
// embedded one, re-signed with a throwaway key), and one `earshot transcribe FILE` per file.
// faster-whisper: one warm worker process (faster-whisper-worker.py; int8), at its defaults (beam 5,
// condition_on_previous_text) and at beam 1. Time is wall
// time per file set; CPU seconds are the daemon's (with its engine process's) plus the CLI's, and
// the worker's (/proc, getrusage); peak RSS is each model holder's VmHWM (earshotd's and its engine
// process's added up). vs-faster-whisper.sh provides the virtual environment and
// the CTranslate2 directories.
import EarshotSystem
import EarshotWire
import Foundation
import TestSupport

struct Options {
    let python, worker, ct2, scratch: String
    let runs, repeats: Int
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

    init(_ arguments: [String]) {
        let options = BenchmarkOptions(arguments, names: ["python", "worker", "ct2", "scratch", "runs", "repeats", "models", "inference-threads", "analysis", "baseline-earshotd", "baseline-analysis", "texts"],
                                       flags: ["unprompted"],
                                       required: ["python", "worker", "ct2", "scratch"],
                                       usage: "usage: vs-faster-whisper --python PY --worker SCRIPT --ct2 DIR --scratch DIR [--runs N] [--repeats N] [--models tiny.en,base] [--inference-threads N] [--analysis KEY=VALUE,…] [--baseline-earshotd PATH] [--baseline-analysis KEY=VALUE,…] [--unprompted] [--texts DIR]")
        (python, worker, ct2, scratch) = (options["python"]!, options["worker"]!, options["ct2"]!, options["scratch"]!)
        runs = options.positive("runs", default: 3)
        repeats = options.positive("repeats", default: 13)
        inferenceThreads = options["inference-threads"].map { _ in options.positive("inference-threads", default: 1) }
        models = options.models
        baseline = options["baseline-earshotd"]
        unprompted = options.flag("unprompted")
        texts = options["texts"]
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

@main
enum VsFasterWhisper {
    static func main() async throws {
        let options = Options(CommandLine.arguments)
        let directory = try TempDirectory("vsfw")
        defer { directory.remove() }
        let longPath = options.scratch + "/librivox-\(options.repeats)x.wav"
        let longReference = try LibriVox.writeRecording(to: longPath, repeats: options.repeats, silence: 0.5)
        let references = try WordErrorRate.librivoxReferences()
        let sets: [(name: String, files: [String], references: [String])] = [
            ("5 LibriVox utterances (3–7 s, one call each)", LibriVox.ids.map(LibriVox.path), LibriVox.ids.map { references[$0] ?? "" }),
            ("\(String(format: "%.1f", Double((try FileManager.default.attributesOfItem(atPath: longPath)[.size] as? Int ?? 44) - 44) / 32000 / 60)) min recording (the utterances \(options.repeats)×, 0.5 s gaps)", [longPath], [longReference]),
        ]
        let load = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(separator: " ") ?? "?"
        say("vs-faster-whisper: \(ProcessInfo.processInfo.activeProcessorCount) CPUs, load average \(load); 2 threads each, warm, interleaved, median of \(options.runs)")
        say("  faster-whisper 1.2.1: int8, one worker process, at its defaults (beam 5, previous text as prompt) and at beam 1; Earshot: earshotd (InferenceThreads=\(options.inferenceThreads.map(String.init) ?? "default")\(options.analysis.map { ", " + $0 }.joined())) + `earshot transcribe FILE` per file")
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
                        let run = try await ChildProcess.run(cli, ["--socket", daemon.socket, "transcribe", file], in: daemon.directory, timeout: .seconds(600))
                        guard run.status == 0 else { fail("earshot transcribe \(file): \(run.stderr)") }
                        texts.append(run.stdout)
                    }
                    return (elapsed(since: start), cpuSeconds(daemon.child.pid) + childrenCPUSeconds() - cpu0, texts)
                })
            }
            // One warm worker holding the model, answering {"text": …} per path.
            let worker = try await BlockingWork.run("worker") {
                try LineWorker(options.python, [options.worker, options.ct2 + "/" + model.ct2, "2"], name: "faster-whisper", awaitsReady: true)
            }
            let fasterWhisper = engines.count
            // faster-whisper at its defaults (beam 5, each window prompted with the text before it),
            // at beam 1, and (--unprompted) at beam 5 without the prompt.
            let variants = [("faster-whisper", 5, true), ("fw beam 1", 1, true)] + (options.unprompted ? [("fw unprompted", 5, false)] : [])
            for (name, beam, prompted) in variants {
                engines.append(Engine(name: name, pid: worker.pid) { files in
                    try await BlockingWork.run("faster-whisper") {
                        let cpu0 = cpuSeconds(worker.pid)
                        let start = ContinuousClock.now
                        let texts = try files.map { try worker.ask(json: ["path": $0, "prompted": prompted, "beam": beam])["text"] as? String ?? "" }
                        return (elapsed(since: start), cpuSeconds(worker.pid) - cpu0, texts)
                    }
                })
            }

            // Warm-up: one untimed call each.
            for engine in engines { _ = try await engine.run([sets[0].files[0]]) }
            let loadsBefore = try await TestConnection.stats(of: daemons[0].socket).modelLoads
            var tallies = Array(repeating: Array(repeating: Tally(), count: engines.count), count: sets.count)
            for run in 0..<options.runs {
                for (index, set) in sets.enumerated() {
                    // Rotate which goes first, so none always runs on a cooler machine.
                    for offset in engines.indices {
                        let engine = (run + offset) % engines.count
                        let result = try await engines[engine].run(set.files)
                        tallies[index][engine].times.append(result.seconds)
                        tallies[index][engine].cpu.append(result.cpu)
                        tallies[index][engine].text = result.text
                    }
                }
            }
            let loads = try await TestConnection.stats(of: daemons[0].socket).modelLoads - loadsBefore
            let calls = options.runs * sets.map(\.files.count).reduce(0, +)
            let peaks = engines.map { ProcessMemory(pid: $0.pid).treePeak }
            await BlockingWork.run("worker-stop") { worker.stop() }
            for daemon in daemons { await daemon.cleanUp() }

            say("")
            say("Whisper \(model.name) (same CTranslate2 weights; Earshot's int8 ONNX converted from them)")
            for (set, tally) in zip(sets, tallies) {
                say("  \(set.name)")
                for (engine, t) in zip(engines, tally) {
                    say("    " + engine.name.padding(toLength: 17, withPad: " ", startingAt: 0) + String(format: "%7.2f s wall  %7.2f s CPU  WER %5.1f %%  peak RSS %4.0f MiB   runs: %@", median(t.times), median(t.cpu),
                               LibriVox.wer(Array(zip(set.references, t.text))) * 100, Double(peaks[engines.firstIndex { $0.name == engine.name }!]) / 1048576,
                               t.times.map { String(format: "%.2f", $0) }.joined(separator: " ")))
                }
                // Ratios of the same round (the engines ran back to back), median over the rounds.
                func ratio(_ a: Int, _ b: Int) -> String {
                    String(format: "time %.2f×, CPU %.2f×", median(zip(tally[a].times, tally[b].times).map(/)), median(zip(tally[a].cpu, tally[b].cpu).map(/)))
                }
                for (offset, variant) in variants.enumerated() {
                    say("    ratio Earshot / \(variant.0): \(ratio(0, fasterWhisper + offset))")
                }
                if hasBaseline { say("    ratio Earshot / Earshot baseline: \(ratio(0, 1))") }
            }
            if let folder = options.texts {
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                for (set, tally) in zip(["utterances", "recording"], tallies) {
                    for (engine, t) in zip(engines, tally) {
                        let name = engine.name.lowercased().replacingOccurrences(of: " ", with: "-")
                        try (t.text.joined(separator: "\n") + "\n").write(toFile: "\(folder)/\(name)-\(model.name)-\(set).txt", atomically: true, encoding: .utf8)
                    }
                }
                say("  texts: \(folder)")
            }
            say("  earshotd model loads during the \(calls) timed calls: \(loads) (peak RSS: over the whole run, loads included)")
        }
    }
}
