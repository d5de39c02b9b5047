import EarshotSystem
import Foundation

/// A long-running part of the daemon (a front, the session coordinator, the asset service, a
/// background loop) that a ``ServiceGroup`` runs.
protocol DaemonService: Sendable {
    /// The name the daemon's log gives it.
    var name: String { get }
    /// Serves until the service is done. Returning or throwing before the group asked it to shut
    /// down is unexpected: the group logs it and shuts the daemon down.
    func run() async throws
    /// Stop taking new work and finish what is in hand; ``run()`` returns when that is done.
    /// Returns at once (it starts the shutdown, it does not wait for it).
    func beginShutdown() async
    /// The shutdown deadline passed: end whatever is left now.
    func forceShutdown() async
}

extension DaemonService {
    func forceShutdown() async {}
}

/// Runs the daemon's services side by side, in the spirit of swift-service-lifecycle's
/// ServiceGroup: a signal, or any service that returns or throws on its own, starts a graceful
/// shutdown — every running service is asked to begin shutting down, in reverse of the given
/// (dependency) order, so fronts stop taking work before what they use does. Unlike
/// swift-service-lifecycle the group does not wait for one service before asking the next: a
/// front's connections stay open until the coordinator has finished their sessions. When
/// `shutdownTimeout` passes on the injected clock (or a second signal comes), the services
/// still running are forced, in the same order; the group returns once every service has.
struct ServiceGroup: Sendable {
    /// Why the group ended.
    struct Outcome: Sendable, Equatable {
        /// What started the shutdown (`signal 15`, `<service> returned`, `<service> failed: …`).
        var reason: String
        /// Services that returned or threw before being asked to shut down.
        var unexpected: [String]
        /// Whether the deadline (or a second signal) forced the services still running.
        var forced: Bool
        /// The daemon's exit status: 0 after a signal, 1 when a service ended on its own.
        var exitCode: Int32 { unexpected.isEmpty ? 0 : 1 }
    }

    /// The services in dependency order: each may use those before it.
    let services: [any DaemonService]
    let clock: any ServiceClock
    let shutdownTimeout: Duration
    /// The next termination signal (0 when there will be none).
    let nextSignal: @Sendable () async -> Int32
    /// Where the group's own events are logged.
    let log: @Sendable (LogLevel, String) -> Void
    /// Called once, as the shutdown starts, with its reason (systemd's `STOPPING=1`).
    var onShutdown: @Sendable (String) -> Void = { _ in }
    /// While the group runs: `probe` every `interval` (systemd's watchdog), on ``clock``.
    var heartbeat: (interval: Duration, probe: @Sendable () async -> Void)?

    private enum Event: Sendable {
        case ended(Int, String?)
        case signal(Int32)
        case deadline
        case heartbeatStopped
    }

    /// Runs every service until all have returned; never throws.
    func run() async -> Outcome {
        var outcome = Outcome(reason: "", unexpected: [], forced: false)
        await withTaskGroup(of: Event.self) { group in
            for (index, service) in services.enumerated() {
                group.addTask {
                    do {
                        try await service.run()
                        return .ended(index, nil)
                    } catch {
                        return .ended(index, "\(error)")
                    }
                }
            }
            group.addTask { .signal(await nextSignal()) }
            if let heartbeat {
                group.addTask { [clock] in
                    while (try? await clock.sleep(for: heartbeat.interval)) != nil { await heartbeat.probe() }
                    return .heartbeatStopped
                }
            }
            var running = Set(services.indices)
            var shuttingDown = false

            func forceRemaining() async {
                guard !outcome.forced else { return }
                outcome.forced = true
                let names = services.indices.reversed().filter(running.contains).map { services[$0].name }
                log(.warning, "shutdown deadline passed, forcing what is still running: \(names.joined(separator: ", "))")
                for index in services.indices.reversed() where running.contains(index) { await services[index].forceShutdown() }
            }

            func beginShutdown(_ reason: String) async {
                shuttingDown = true
                outcome.reason = reason
                onShutdown(reason)
                for index in services.indices.reversed() where running.contains(index) { await services[index].beginShutdown() }
                group.addTask { [clock, shutdownTimeout] in
                    try? await clock.sleep(for: shutdownTimeout)
                    return .deadline
                }
            }

            while let event = await group.next() {
                switch event {
                case .ended(let index, let failure):
                    running.remove(index)
                    let name = services[index].name
                    if !shuttingDown {
                        let reason = failure.map { "\(name) failed: \($0)" } ?? "\(name) returned"
                        outcome.unexpected.append(name)
                        log(.error, "\(reason) while the daemon was running; shutting down")
                        await beginShutdown(reason)
                    } else if let failure {
                        log(.warning, "\(name) failed while shutting down: \(failure)")
                    }
                case .signal(let number) where number != 0:
                    group.addTask { .signal(await nextSignal()) } // one waiter at a time; another signal forces
                    if !shuttingDown {
                        log(.notice, "received signal \(number), shutting down (sessions and in-flight requests get \(shutdownTimeout.formatted()))")
                        await beginShutdown("signal \(number)")
                    } else {
                        await forceRemaining()
                    }
                case .deadline:
                    await forceRemaining()
                case .signal, .heartbeatStopped:
                    break
                }
                if running.isEmpty { break }
            }
            group.cancelAll()
        }
        return outcome
    }
}

extension Duration {
    /// `30 s`, `1.5 s`: how the log states a timeout.
    fileprivate func formatted() -> String {
        let (seconds, attoseconds) = components
        return attoseconds == 0 ? "\(seconds) s" : String(format: "%.3g s", Double(seconds) + Double(attoseconds) / 1e18)
    }
}
