import EarshotSystem
import Foundation

/// Logs refusals (connection limits, slow clients) once per burst, not once per connection: the
/// first refusal of a peer is logged; further ones within ``quiet`` of the last are only counted,
/// and the line that starts the peer's next burst says how many the previous one refused.
final class RefusalLog: @unchecked Sendable {
    // Unchecked: state is guarded by `lock`.
    private let lock = NSLock()
    private let logger: Logger
    private let clock: any ServiceClock
    /// How long a peer must go unrefused for its next refusal to be logged.
    let quiet: Duration
    private var bursts: [String: (last: Duration, unlogged: Int)] = [:]
    /// Most peers remembered; quiet ones are forgotten first.
    static let maxPeers = 4096

    init(logger: Logger, clock: any ServiceClock, quiet: Duration = .seconds(60)) {
        self.logger = logger
        self.clock = clock
        self.quiet = quiet
    }

    /// `peer` was refused because of `message`; returns whether this refusal was logged.
    @discardableResult
    func refused(_ peer: String, _ message: String, _ fields: [String: String] = [:]) -> Bool {
        let now = clock.elapsed
        let unlogged: Int? = lock.withLock {
            if let burst = bursts[peer], now - burst.last < quiet {
                bursts[peer] = (now, burst.unlogged + 1)
                return nil
            }
            let previous = bursts[peer]?.unlogged ?? 0
            if bursts.count >= Self.maxPeers { bursts = bursts.filter { now - $0.value.last < quiet } }
            bursts[peer] = (now, 0)
            return previous
        }
        guard let unlogged else { return false }
        let more = unlogged > 0 ? " (its previous burst: \(unlogged) more not logged)" : ""
        logger.warning("refused \(peer): \(message)\(more); further refusals within \(quiet) are counted, not logged", fields.merging(["peer": peer]) { $1 })
        return true
    }
}
