// speech-bench: speech analysis through the real earshotd against the same engine in-process
// (issue 4, "Benchmarks"), every figure side by side with its baseline in one run:
//   (a) a >60 s recording transcribed by the daemon vs the same session code (SpeechService with
//       WhisperModel + SileroDetector) called in-process on the same file and chunks: time ratio,
//       goal ≤ 1.05×;
//   (b) 8 concurrent sessions vs 1 on the daemon: throughput ratio, daemon memory with the shared
//       model counted once (earshot.stats);
//   (c) latency from the last audio chunk (sent at the live pace) to the final result.
//
//     Benchmarks/speech.sh [--runs N] [--sessions N] [--repeats N]
//
// Needs the embedded catalog (Scripts/setup.sh) with the whisper-base asset; earshotd and
// earshot must be built beside this executable (speech.sh does that, in release mode).
import EarshotAudio
import EarshotSpeech
import EarshotSystem
import EarshotWire
import Foundation
import TestSupport

struct Options {
    var runs = 3
    var sessions = 8
    var repeats = 3

    init(_ arguments: [String]) {
        var rest = arguments.dropFirst()
        while let flag = rest.popFirst() {
            guard let value = rest.popFirst().flatMap(Int.init), value > 0 else { Self.usage() }
            switch flag {
            case "--runs": runs = value
            case "--sessions": sessions = value
            case "--repeats": repeats = value
            default: Self.usage()
            }
        }
    }

    static func usage() -> Never {
        FileHandle.standardError.write(Data("usage: speech-bench [--runs N] [--sessions N] [--repeats N]\n".utf8))
        exit(64)
    }
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("speech-bench: \(message)\n".utf8))
    if let daemonPID { kill(daemonPID, SIGKILL) }
    exit(1)
}

let librivox = "/usr/share/pocketsphinx/test/data/librivox"
let ids = [870, 880, 890, 920, 930].map { "sense_and_sensibility_01_austen_64kb-0\($0)" }
let catalogPath = "/usr/local/share/earshot/catalog/catalog.json"
let rate = 16000
let chunk = 8000 // 0.5 s per audio frame, as a file-transcribing client sends
/// The daemon this run started, killed by `fail`.
nonisolated(unsafe) var daemonPID: pid_t?

func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }
func mib(_ bytes: Int) -> String { String(format: "%.0f MiB", Double(bytes) / 1048576) }

/// Utterances `repeats` times, each followed by 1 s of silence (16 kHz mono), and the reference.
func recording(repeats: Int) throws -> (samples: [Float], reference: String) {
    var samples: [Float] = []
    var references: [String] = []
    let all = try WordErrorRate.librivoxReferences()
    for _ in 0..<repeats {
        for id in ids {
            samples += try AudioFileReader(path: "\(librivox)/\(id).wav").readAll()
            samples += [Float](repeating: 0, count: rate)
            references.append(all[id] ?? "")
        }
    }
    return (samples, references.joined(separator: " "))
}

func hypothesisWords(_ text: String) -> String {
    WordErrorRate.words(text).map { $0 == "mr" ? "mister" : $0 }.joined(separator: " ")
}

// MARK: Daemon client

/// One session over a raw connection; records when each event arrived.
struct DaemonRun: Sendable {
    var text = ""
    var lastFinalAt: ContinuousClock.Instant?
    var finishedAt: ContinuousClock.Instant?
}

func request(_ connection: TestConnection, _ event: some WireEvent, id: String) async throws -> Frame {
    var frame = try Frame(event)
    frame.data["id"] = .string(id)
    try await connection.channel.send(frame)
    while true {
        guard let next = try await connection.next(timeout: .seconds(120)) else { fail("the daemon closed the connection") }
        if next.requestID == id { return next }
    }
}

func openSession(_ connection: TestConnection, retention: ModelRetention = .lingering) async throws -> String {
    let open = AnalyzerOpen(modules: [ModuleConfiguration(kind: .transcriber, locale: "en-US")], options: AnalysisOptions(modelRetention: retention))
    let reply = try await request(connection, open, id: "open")
    guard reply.type == AnalyzerOpened.eventType else { fail("open failed: \(reply.data)") }
    return try reply.decode(AnalyzerOpened.self).session
}

/// Sends `samples` (paced by `pace`, if given, in seconds of wall time per second of audio from
/// `paceFrom` on), finishes, and reads events until `finished`.
func daemonTranscribe(_ connection: TestConnection, session: String, _ samples: [Float], pace: Double? = nil, paceFrom: Int = 0,
                      chunkSize: Int = chunk) async throws -> (run: DaemonRun, lastChunkAt: ContinuousClock.Instant) {
    // Read events concurrently with sending so nothing waits on a full socket.
    let reader = Task { () -> DaemonRun in
        var run = DaemonRun()
        while run.finishedAt == nil {
            guard let frame = try await connection.next(timeout: .seconds(300)) else { break }
            if frame.type == AnalyzerResult.eventType, let result = try? frame.decode(AnalyzerResult.self), result.isFinal, !result.text.isEmpty {
                run.text += result.text + " "
                run.lastFinalAt = .now
            } else if frame.type == AnalyzerFinished.eventType {
                run.finishedAt = .now
            }
        }
        return run
    }
    let start = ContinuousClock.now
    var lastChunkAt = start
    for offset in stride(from: 0, to: samples.count, by: chunkSize) {
        let end = min(offset + chunkSize, samples.count)
        if let pace, end > paceFrom {
            try await Task.sleep(until: start + .seconds(Double(end - paceFrom) / Double(rate) * pace), clock: .continuous)
        }
        try await connection.send(AnalyzerAudio(session: session, format: .speech16k), payload: PCMSamples.s16le(Array(samples[offset..<end])))
        lastChunkAt = .now
    }
    var frame = try Frame(AnalyzerControl(session: session, action: "finish", mode: .finalizeThroughEndOfInput))
    frame.data["id"] = .string("finish")
    try await connection.channel.send(frame)
    return (try await reader.value, lastChunkAt)
}

// MARK: In-process baseline

final class InProcessRun: @unchecked Sendable {
    private let lock = NSLock()
    private var texts: [String] = []
    private var continuation: CheckedContinuation<Void, Never>?
    private var done = false

    func event(_ event: SessionEvent) {
        lock.withLock {
            switch event {
            case .result(let result) where result.isFinal && !result.text.isEmpty: texts.append(result.text)
            case .finished:
                done = true
                continuation?.resume()
                continuation = nil
            default: break
            }
        }
    }

    func wait() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let resumeNow = lock.withLock {
                if done { return true }
                continuation = c
                return false
            }
            if resumeNow { c.resume() }
        }
    }

    var text: String { lock.withLock { texts.joined(separator: " ") } }
}

func inProcessTranscribe(_ service: SpeechService, plan: SessionPlan, _ samples: [Float]) async throws -> (seconds: Double, text: String) {
    let run = InProcessRun()
    let session = try await service.open(plan) { _, event in run.event(event) }
    let start = ContinuousClock.now
    for offset in stride(from: 0, to: samples.count, by: chunk) {
        await session.accept(PCMSamples.s16le(Array(samples[offset..<min(offset + chunk, samples.count)])), format: .speech16k, start: nil)
    }
    _ = await session.finish(.finalizeThroughEndOfInput, time: nil)
    await run.wait()
    let elapsed = seconds(ContinuousClock.now - start)
    await service.close(session.id)
    return (elapsed, run.text)
}

/// The installed asset `id` as the session layer takes it (paths from `earshot.assets`, file roles
/// from the catalog).
func modelAsset(_ id: String, assets: AssetsReply) -> ModelAsset {
    guard let installed = assets.assets.first(where: { $0.id == id && $0.current }) else { fail("\(id) is not installed") }
    guard let data = FileManager.default.contents(atPath: catalogPath),
          let catalog = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
          let entries = catalog["assets"] as? [[String: Any]],
          let entry = entries.first(where: { $0["id"] as? String == id }),
          let files = entry["files"] as? [String: String] else { fail("\(id) is not in \(catalogPath)") }
    return ModelAsset(key: "\(id)@\(installed.version)", engine: installed.engine, files: files.mapValues { installed.path + "/" + $0 })
}

// MARK: Main

@main
enum SpeechBench {
    static func main() async throws {

        let options = Options(CommandLine.arguments)
        guard FileManager.default.fileExists(atPath: catalogPath),
              (try? String(contentsOfFile: catalogPath, encoding: .utf8))?.contains("\"whisper-base\"") == true else {
            fail("the embedded catalog has no whisper-base asset: run Scripts/setup.sh")
        }
        let daemon = try await TestDaemon(config: "[Analysis]\nMaxConcurrentAnalyses=\(max(options.sessions, 4))\nInferenceThreads=2\n")
        daemonPID = daemon.child.pid
        let install = try await ChildProcess.run(BuiltProducts.path("earshot"), ["--socket", daemon.socket, "install", "--locale", "en-US", "--module", "transcriber"], in: daemon.directory)
        guard install.status == 0 else { fail("earshot install: \(install.stderr)") }
        let monitor = try TestConnection(daemon.socket)
        let assets = try await request(monitor, AssetsRequest(), id: "assets").decode(AssetsReply.self)
        let whisper = modelAsset("whisper-base", assets: assets), vad = modelAsset("silero-vad", assets: assets)
        let (long, longReference) = try recording(repeats: options.repeats)
        let longSeconds = Double(long.count) / Double(rate)
        print("speech-bench: \(ProcessInfo.processInfo.activeProcessorCount) CPUs, load average \((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(separator: " ") ?? "?"), Whisper base int8, InferenceThreads=2, best of \(options.runs)")

        // (a) daemon vs in-process on the long recording.
        let service = SpeechService(settings: SpeechSettings(maxConcurrentAnalyses: 64, maxConcurrentAnalysesHard: 64, lingerSeconds: 3600, inferenceThreads: 2))
        let plan = SessionPlan(modules: [(ModuleConfiguration(kind: .transcriber, locale: "en-US"), whisper)], vad: vad,
                               options: AnalysisOptions(modelRetention: .lingering), context: AnalysisContextData(), owner: SessionOwner(token: 1), ownerUID: getuid())
        var daemonTimes: [Double] = [], localTimes: [Double] = []
        var daemonText = "", localText = ""
        let client = try TestConnection(daemon.socket)
        // Warm-up (loads both models, not timed).
        _ = try await daemonTranscribe(client, session: try await openSession(client), Array(long.prefix(5 * rate)))
        _ = try await inProcessTranscribe(service, plan: plan, Array(long.prefix(5 * rate)))
        for _ in 0..<options.runs {
            let session = try await openSession(client)
            let start = ContinuousClock.now
            let (run, _) = try await daemonTranscribe(client, session: session, long)
            daemonTimes.append(seconds(run.finishedAt! - start))
            daemonText = run.text
            let local = try await inProcessTranscribe(service, plan: plan, long)
            localTimes.append(local.seconds)
            localText = local.text
        }
        let daemonBest = daemonTimes.min()!, localBest = localTimes.min()!
        let daemonWER = WordErrorRate.rate([(longReference, hypothesisWords(daemonText))])
        let localWER = WordErrorRate.rate([(longReference, hypothesisWords(localText))])
        print("")
        print("(a) \(String(format: "%.1f", longSeconds)) s recording (\(options.repeats)× the five LibriVox utterances + 1 s silence each), 0.5 s chunks")
        print(String(format: "    in-process SpeechService  %6.2f s  (RTF %.3f, WER %.1f %%)   runs: %@", localBest, localBest / longSeconds, localWER * 100, localTimes.map { String(format: "%.2f", $0) }.joined(separator: " ")))
        print(String(format: "    earshotd over the socket  %6.2f s  (RTF %.3f, WER %.1f %%)   runs: %@", daemonBest, daemonBest / longSeconds, daemonWER * 100, daemonTimes.map { String(format: "%.2f", $0) }.joined(separator: " ")))
        print(String(format: "    ratio daemon / in-process %6.3f×  (goal ≤ 1.05×)%@", daemonBest / localBest, hypothesisWords(daemonText) == hypothesisWords(localText) ? ", identical transcripts" : ", TRANSCRIPTS DIFFER"))

        // (b) N concurrent sessions vs 1 on the daemon, one pass of the utterances each.
        let (pass, _) = try recording(repeats: 1)
        let passSeconds = Double(pass.count) / Double(rate)

        /// The daemon's resident memory and its engine process's (which holds the model).
        func residentWithEngine(_ stats: StatsReply) -> Int {
            stats.residentBytes + (stats.engineProcess.map { $0.anonymousBytes + $0.fileBytes } ?? 0)
        }

        /// Runs `count` sessions at once; returns wall seconds and the stats seen while they ran.
        func concurrent(_ count: Int) async throws -> (seconds: Double, peakResident: Int, models: [LoadedModelInfo], maxUsers: Int) {
            let connections = try (0..<count).map { _ in try TestConnection(daemon.socket) }
            defer { connections.forEach { $0.close() } }
            var sessions: [String] = []
            for connection in connections { sessions.append(try await openSession(connection)) }
            let sampler = Task { () -> (Int, [LoadedModelInfo], Int) in
                var peak = 0, users = 0
                var models: [LoadedModelInfo] = []
                let statsConnection = try TestConnection(daemon.socket)
                defer { statsConnection.close() }
                var n = 0
                while !Task.isCancelled {
                    n += 1
                    guard let stats = try? await request(statsConnection, StatsRequest(), id: "s\(n)").decode(StatsReply.self) else { break }
                    peak = max(peak, residentWithEngine(stats))
                    if stats.models.map(\.users).reduce(0, +) >= users { users = stats.models.map(\.users).reduce(0, +); models = stats.models }
                    try? await Task.sleep(for: .milliseconds(100))
                }
                return (peak, models, users)
            }
            let start = ContinuousClock.now
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (connection, session) in zip(connections, sessions) {
                    group.addTask { _ = try await daemonTranscribe(connection, session: session, pass) }
                }
                try await group.waitForAll()
            }
            let elapsed = seconds(ContinuousClock.now - start)
            sampler.cancel()
            let (peak, models, users) = try await sampler.value
            return (elapsed, peak, models, users)
        }

        let idle = try await request(monitor, StatsRequest(), id: "idle").decode(StatsReply.self)
        var one: (seconds: Double, peakResident: Int, models: [LoadedModelInfo], maxUsers: Int)?
        var many: (seconds: Double, peakResident: Int, models: [LoadedModelInfo], maxUsers: Int)?
        // All single-session runs first: the daemon keeps what the concurrent decodes grew.
        for _ in 0..<options.runs {
            let a = try await concurrent(1)
            if one == nil || a.seconds < one!.seconds { one = a }
        }
        for _ in 0..<options.runs {
            let b = try await concurrent(options.sessions)
            if many == nil || b.seconds < many!.seconds { many = b }
        }
        let idleAfter = try await request(monitor, StatsRequest(), id: "idle-after").decode(StatsReply.self)
        let throughput1 = passSeconds / one!.seconds, throughputN = Double(options.sessions) * passSeconds / many!.seconds
        print("")
        print("(b) \(options.sessions) concurrent sessions vs 1, each \(String(format: "%.1f", passSeconds)) s of speech (daemon, \(ProcessInfo.processInfo.activeProcessorCount) CPUs)")
        print(String(format: "    1 session    %6.2f s wall, %5.1f s audio/s, peak daemon + engine RSS %@", one!.seconds, throughput1, mib(one!.peakResident)))
        print(String(format: "    %d sessions   %6.2f s wall, %5.1f s audio/s, peak daemon + engine RSS %@", options.sessions, many!.seconds, throughputN, mib(many!.peakResident)))
        print(String(format: "    throughput ratio %d:1 = %.2f×; daemon + engine RSS idle with the model loaded: %@ before, %@ after the concurrent runs",
                     options.sessions, throughputN / throughput1, mib(residentWithEngine(idle)), mib(residentWithEngine(idleAfter))))
        for model in many!.models {
            print("    loaded models while \(options.sessions) ran: \(many!.models.count) — \(model.key) users \(model.users), \(mib(model.memoryBytes)) (counted once); model_loads since start \(idle.modelLoads)")
        }

        // (c) latency: the last 2 s of each utterance at the live pace, then finish; time from the last
        // chunk to the final result (and to `finished`). 100 ms chunks.
        var finalLatencies: [Double] = [], finishedLatencies: [Double] = []
        for id in ids {
            let clip = try AudioFileReader(path: "\(librivox)/\(id).wav").readAll()
            let session = try await openSession(client)
            let (run, lastChunk) = try await daemonTranscribe(client, session: session, clip, pace: 1, paceFrom: max(0, clip.count - 2 * rate), chunkSize: rate / 10)
            finalLatencies.append(max(0, seconds(run.lastFinalAt! - lastChunk)))
            finishedLatencies.append(seconds(run.finishedAt! - lastChunk))
        }
        func summary(_ values: [Double]) -> String {
            let sorted = values.sorted()
            return String(format: "median %.0f ms, max %.0f ms", sorted[sorted.count / 2] * 1000, sorted.last! * 1000)
        }
        print("")
        print("(c) latency, last 100 ms chunk (live pace) → final result, then finish(finalizeThroughEndOfInput), Whisper, 5 utterances")
        print("    → last final result: \(summary(finalLatencies))   (per utterance: \(finalLatencies.map { String(format: "%.0f", $0 * 1000) }.joined(separator: " ")) ms)")
        print("    → finished:          \(summary(finishedLatencies))")
        client.close()
        monitor.close()
        await daemon.cleanUp()
    }
}
