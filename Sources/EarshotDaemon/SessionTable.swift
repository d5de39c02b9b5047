import Foundation

/// Open analysis sessions by connection, then by session id: the daemon's one registry of
/// sessions, owned by ``AnalysisCoordinator`` (which writes it, from its actor) and readable from
/// any thread (a connection's idle check runs on its channel's queue; shutdown asks which
/// connections still have sessions).
final class SessionTable<Entry: Sendable>: @unchecked Sendable {
    // @unchecked: `tables` is only touched while holding `lock`.
    private let lock = NSLock()
    private var tables: [Int: [String: Entry]] = [:]

    /// Session `id` of `connection`; assigning nil removes it.
    subscript(connection: Int, id: String) -> Entry? {
        get { lock.withLock { tables[connection]?[id] } }
        set {
            lock.withLock {
                tables[connection, default: [:]][id] = newValue
                if tables[connection]?.isEmpty == true { tables[connection] = nil }
            }
        }
    }

    /// Removes and returns session `id` of `connection` (nil when it is not there).
    func remove(_ id: String, of connection: Int) -> Entry? {
        lock.withLock {
            let entry = tables[connection]?.removeValue(forKey: id)
            if tables[connection]?.isEmpty == true { tables[connection] = nil }
            return entry
        }
    }

    /// The sessions of `connection` by id.
    func sessions(of connection: Int) -> [String: Entry] { lock.withLock { tables[connection] ?? [:] } }

    /// Every session.
    var all: [(connection: Int, id: String, entry: Entry)] {
        lock.withLock { tables.flatMap { connection, table in table.map { (connection, $0.key, $0.value) } } }
    }

    var isEmpty: Bool { lock.withLock { tables.isEmpty } }

    /// Whether `connection` has an open session.
    func hasSessions(_ connection: Int) -> Bool { lock.withLock { tables[connection] != nil } }
}
