import EarshotSystem
import EarshotWire
import Foundation
import Synchronization
import Testing

/// The link to a spawned helper (earshotd's engine process). `cat` writing back into its link is
/// the simplest worker there is: it answers every request with the request itself, id included.
@Suite struct WorkerProcessTests {
    static let limits = FrameLimits()

    static func echo() throws -> WorkerProcess {
        try WorkerProcess(executable: "/bin/sh", arguments: ["-c", "exec cat >&0"], limits: limits)
    }

    @Test func repliesGoToTheCallThatAskedEvenWhenCallsOverlap() throws {
        let worker = try Self.echo()
        defer { worker.close() }
        let mismatches = Mutex(0)
        let done = DispatchSemaphore(value: 0)
        for thread in 0..<4 {
            Thread.detachNewThread {
                for round in 0..<50 {
                    let tag = "\(thread)-\(round)"
                    let payload = [UInt8](repeating: UInt8(thread), count: 1000 * (round + 1))
                    let reply = try? worker.call(Frame(type: "echo", data: ["tag": .string(tag)], payload: payload))
                    if reply?.data["tag"]?.stringValue != tag || reply?.payload != payload { mismatches.withLock { $0 += 1 } }
                }
                done.signal()
            }
        }
        for _ in 0..<4 { done.wait() }
        #expect(mismatches.withLock { $0 } == 0)
        #expect(worker.isRunning)
    }

    @Test func aClosedLinkEndsTheWorkerAndLaterCallsFail() throws {
        let worker = try Self.echo()
        _ = try worker.call(Frame(type: "echo"))
        worker.close()
        #expect(throws: WorkerError.self) {
            // The call made as the worker ends fails; so does every one after.
            while true { _ = try worker.call(Frame(type: "echo")) }
        }
        #expect(!worker.isRunning)
        #expect(kill(worker.pid, 0) == -1, "the worker was reaped")
    }

    @Test func aKilledWorkerFailsTheCallWaitingForItWithItsSignal() throws {
        // sleep never reads its input: the call waits until the worker is killed.
        let worker = try WorkerProcess(executable: "/bin/sleep", arguments: ["600"], limits: Self.limits)
        Thread.detachNewThread { kill(worker.pid, SIGKILL) }
        #expect {
            _ = try worker.call(Frame(type: "echo"))
        } throws: { error in
            guard case WorkerError.exited(let why) = error else { return false }
            return why.contains("signal 9")
        }
        #expect(!worker.isRunning)
    }

    /// Regression: earshotd ignores SIGTERM and SIGINT (Dispatch sources take them), and its engine
    /// process inherited that, so `kill -TERM` did nothing to it and it outlived a stop.
    @Test func aWorkerInheritsNoIgnoredOrBlockedSignal() throws {
        // SIGUSR2 stands in for SIGTERM: nothing else in the test process uses it.
        let previous = signal(SIGUSR2, SIG_IGN)
        var blocked = sigset_t()
        var old = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGUSR1)
        pthread_sigmask(SIG_BLOCK, &blocked, &old)
        let worker = try Self.echo()
        pthread_sigmask(SIG_SETMASK, &old, nil)
        signal(SIGUSR2, previous)
        defer { worker.close() }
        _ = try worker.call(Frame(type: "echo")) // cat runs: the shell has exec'd it
        let status = try String(contentsOfFile: "/proc/\(worker.pid)/status", encoding: .utf8)
        func mask(_ name: String) -> UInt64 {
            status.split(separator: "\n").first { $0.hasPrefix(name + ":") }
                .flatMap { UInt64($0.split(separator: "\t").last.map(String.init) ?? "", radix: 16) } ?? .max
        }
        #expect(mask("SigIgn") & (1 << (UInt64(SIGUSR2) - 1)) == 0, "SIGUSR2 stayed ignored")
        #expect(mask("SigBlk") & (1 << (UInt64(SIGUSR1) - 1)) == 0, "SIGUSR1 stayed blocked")
        #expect(kill(worker.pid, SIGUSR2) == 0)
        #expect {
            while true { _ = try worker.call(Frame(type: "echo")) }
        } throws: { error in
            guard case WorkerError.exited(let why) = error else { return false }
            return why.contains("signal \(SIGUSR2)")
        }
    }

    @Test func aMissingExecutableIsASpawnFailure() {
        #expect {
            _ = try WorkerProcess(executable: "/nonexistent/earshot-engine", limits: Self.limits)
        } throws: { error in
            guard case WorkerError.spawnFailed(let why) = error else { return false }
            return why.contains("/nonexistent/earshot-engine")
        }
    }
}
