@testable import EarshotDaemon
import EarshotSystem
import Foundation
import Testing
import TestSupport

/// Issue 31: the daemon's services run in one group — a service that ends on its own shuts the
/// daemon down gracefully, shutdown asks the fronts first, and the deadline is the injected clock's.
struct ServiceGroupTests {
    /// What the services of a test did, in order (`begin A`, `force B`, `end C`).
    final class Journal: @unchecked Sendable {
        private let lock = NSLock()
        private var lines: [String] = []
        func add(_ line: String) { lock.withLock { lines.append(line) } }
        var entries: [String] { lock.withLock { lines } }
    }

    /// A service that runs until asked to stop: at the start of shutdown, or only when forced
    /// (`stubborn`), or that returns or throws on its own when told to.
    struct Probe: DaemonService {
        enum Ending { case atShutdown, whenForced, now, throwing }
        let name: String
        let ending: Ending
        let journal: Journal
        let stop = Latch()

        func run() async throws {
            switch ending {
            case .now: break
            case .throwing: throw SystemError("read", errno: EIO)
            case .atShutdown, .whenForced: await stop.wait()
            }
            journal.add("end \(name)")
        }

        func beginShutdown() async {
            journal.add("begin \(name)")
            if ending == .atShutdown { stop.open() }
        }

        func forceShutdown() async {
            journal.add("force \(name)")
            stop.open()
        }
    }

    /// Signals a test sends, one at a time.
    final class Signals: @unchecked Sendable {
        let stream: AsyncStream<Int32>
        let continuation: AsyncStream<Int32>.Continuation
        init() { (stream, continuation) = AsyncStream.makeStream() }
        func next() async -> Int32 {
            var iterator = stream.makeAsyncIterator()
            return await iterator.next() ?? 0
        }
    }

    func group(_ services: [any DaemonService], clock: ManualClock = ManualClock(), signals: Signals = Signals(),
               journal: Journal) -> ServiceGroup {
        ServiceGroup(services: services, clock: clock, shutdownTimeout: .seconds(10), nextSignal: { await signals.next() },
                     log: { level, message in journal.add("log \(level.rawValue): \(message)") })
    }

    @Test func aServiceThatReturnsUnexpectedlyShutsTheDaemonDownGracefully() async {
        let journal = Journal()
        let services: [any DaemonService] = [
            Probe(name: "assets", ending: .atShutdown, journal: journal),
            Probe(name: "evictor", ending: .now, journal: journal),
            Probe(name: "front", ending: .atShutdown, journal: journal),
        ]
        let outcome = await group(services, journal: journal).run()
        #expect(outcome == ServiceGroup.Outcome(reason: "evictor returned", unexpected: ["evictor"], forced: false))
        #expect(outcome.exitCode == 1, "systemd restarts a daemon that lost a service (Restart=on-failure)")
        let entries = journal.entries
        #expect(entries.contains("log error: evictor returned while the daemon was running; shutting down"), "\(entries)")
        #expect(entries.filter { $0.hasPrefix("begin") } == ["begin front", "begin assets"], "the others, fronts first: \(entries)")
        #expect(entries.contains("end front") && entries.contains("end assets"))
        #expect(!entries.contains { $0.hasPrefix("force") }, "graceful, not forced")
    }

    @Test func aServiceThatThrowsIsLoggedWithItsErrorAndShutsTheDaemonDown() async {
        let journal = Journal()
        let services: [any DaemonService] = [Probe(name: "coordinator", ending: .atShutdown, journal: journal),
                                             Probe(name: "HTTP front", ending: .throwing, journal: journal)]
        let outcome = await group(services, journal: journal).run()
        #expect(outcome.unexpected == ["HTTP front"] && outcome.exitCode == 1)
        #expect(outcome.reason.hasPrefix("HTTP front failed: read"), "\(outcome.reason)")
        #expect(journal.entries.contains("begin coordinator"))
    }

    @Test func aSignalShutsEveryServiceDownInReverseOrderAndExitsZero() async {
        let journal = Journal(), signals = Signals()
        let services: [any DaemonService] = ["assets", "coordinator", "socket front"].map { Probe(name: $0, ending: .atShutdown, journal: journal) }
        async let outcome = group(services, signals: signals, journal: journal).run()
        signals.continuation.yield(SIGTERM)
        let ended = await outcome
        #expect(ended == ServiceGroup.Outcome(reason: "signal \(SIGTERM)", unexpected: [], forced: false))
        #expect(ended.exitCode == 0)
        #expect(journal.entries.filter { $0.hasPrefix("begin") } == ["begin socket front", "begin coordinator", "begin assets"])
    }

    @Test func theShutdownDeadlineOnTheInjectedClockForcesWhatIsStillRunning() async {
        let journal = Journal(), signals = Signals(), clock = ManualClock()
        let services: [any DaemonService] = [Probe(name: "coordinator", ending: .whenForced, journal: journal),
                                             Probe(name: "front", ending: .atShutdown, journal: journal)]
        async let outcome = group(services, clock: clock, signals: signals, journal: journal).run()
        signals.continuation.yield(SIGTERM)
        await clock.sleepers(atLeast: 1) // the deadline
        #expect(!journal.entries.contains("force coordinator"), "nothing is forced before the deadline")
        clock.advance(by: .seconds(9))
        #expect(!journal.entries.contains("force coordinator"))
        clock.advance(by: .seconds(1))
        let ended = await outcome
        #expect(ended.forced && ended.exitCode == 0)
        #expect(journal.entries.contains("force coordinator"))
        #expect(!journal.entries.contains("force front"), "what had already returned is not forced")
        #expect(journal.entries.contains("log warning: shutdown deadline passed, forcing what is still running: coordinator"), "\(journal.entries)")
    }

    @Test func aSecondSignalForcesWithoutWaitingForTheDeadline() async {
        let journal = Journal(), signals = Signals()
        let services: [any DaemonService] = [Probe(name: "coordinator", ending: .whenForced, journal: journal)]
        async let outcome = group(services, signals: signals, journal: journal).run()
        signals.continuation.yield(SIGTERM)
        signals.continuation.yield(SIGINT)
        let ended = await outcome
        #expect(ended.forced && ended.reason == "signal \(SIGTERM)")
    }

    @Test func theHeartbeatProbesOnTheInjectedClockWhileTheGroupRuns() async {
        let journal = Journal(), signals = Signals(), clock = ManualClock()
        var group = group([Probe(name: "front", ending: .atShutdown, journal: journal)], clock: clock, signals: signals, journal: journal)
        group.heartbeat = (.seconds(15), { journal.add("watchdog") })
        let running = group
        async let outcome = running.run()
        for _ in 1...3 {
            await clock.sleepers(atLeast: 1)
            clock.advance(by: .seconds(15))
        }
        await clock.sleepers(atLeast: 1) // asleep again: the third probe is done
        #expect(journal.entries.filter { $0 == "watchdog" }.count == 3)
        signals.continuation.yield(SIGTERM)
        _ = await outcome
    }
}
