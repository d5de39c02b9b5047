// fuzz-bench: a long seeded protocol fuzz of the real earshotd (issue 8, "What must be shown": a run
// of at least 10⁶ frames). The daemon has the PocketSphinx dictation model installed, so hostile
// Wyoming transcriptions and analyzer sessions really run. Prints progress every 10⁵ frames with the
// daemon's resident memory, then the totals: frames per second, peak and final resident memory
// against the idle daemon's, whether the daemon survived and still answers.
//
//     Benchmarks/fuzz.sh [--frames N] [--seed S]
import EarshotSystem
import EarshotWire
import Foundation
import TestSupport

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("fuzz-bench: \(message)\n".utf8))
    exit(1)
}

var frames = 1_000_000
var seed: UInt64 = 1
var rest = CommandLine.arguments.dropFirst()
while let flag = rest.popFirst() {
    switch (flag, rest.popFirst()) {
    case ("--frames", let value?): frames = Int(value) ?? 0
    case ("--seed", let value?): seed = UInt64(value) ?? 0
    default: fail("usage: fuzz-bench [--frames N] [--seed S]")
    }
}
guard frames > 0 else { fail("--frames must be positive") }

let daemon = try await TestDaemon(config: "[Limits]\nOutputStallTimeoutSec=2\n")
let install = try await ChildProcess.run(BuiltProducts.path("earshot"), ["--socket", daemon.socket, "install", "--locale", "en-US", "--module", "dictation"], in: daemon.directory)
guard install.status == 0 else { fail("earshot install: \(install.stderr)") }
let pid = daemon.child.pid
let idle = ProtocolFuzzer.residentBytes(pid: pid) ?? 0
print("fuzz-bench: \(frames) frames, seed \(seed), idle daemon resident \(idle >> 20) MiB")

var total = ProtocolFuzzer.Report()
var peak = idle
let started = ContinuousClock.now
var round: UInt64 = 0
let step = 100_000
while total.frames < frames {
    round += 1
    let roundSeed = seed &* 1_000_003 &+ round
    let want = min(step, frames - total.frames)
    let socket = daemon.socket
    let report = try await BlockingWork.run("earshot.fuzz") {
        var fuzzer = ProtocolFuzzer(seed: roundSeed)
        return try fuzzer.run(socket: socket, frames: want)
    }
    total.add(report)
    guard daemon.child.process.isRunning else { fail("the daemon died after \(total.frames) frames: \(daemon.child.stderr.suffix(3000))") }
    let resident = ProtocolFuzzer.residentBytes(pid: pid) ?? 0
    peak = max(peak, resident)
    let seconds = (ContinuousClock.now - started) / .seconds(1)
    print("  \(total.frames) frames, \(Int(Double(total.frames) / seconds)) frames/s, resident \(resident >> 20) MiB")
}
let seconds = (ContinuousClock.now - started) / .seconds(1)
let client = try TestConnection(daemon.socket)
let answered = (try? await client.roundTrip(Ping(text: "alive")))??.type == Pong.eventType
client.close()
try await Task.sleep(for: .seconds(2))
let final = ProtocolFuzzer.residentBytes(pid: pid) ?? 0
print("fuzz-bench: \(total) in \(String(format: "%.0f", seconds)) s (\(Int(Double(total.frames) / seconds)) frames/s)")
print("fuzz-bench: daemon survived: \(daemon.child.process.isRunning ? "yes" : "NO"), answers ping: \(answered ? "yes" : "NO"); "
      + "resident idle \(idle >> 20) MiB, peak \(peak >> 20) MiB (\(String(format: "%.2f", Double(peak) / Double(max(idle, 1))))× idle), after \(final >> 20) MiB")
await daemon.cleanUp()
exit(answered ? 0 : 1)
