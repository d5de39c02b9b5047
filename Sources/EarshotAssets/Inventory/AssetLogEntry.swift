/// One line of the inventory's log: the daemon writes it to the journal at `priority` with
/// `fields` as structured journal fields (`asset`, `from_version`, `to_version`, `source`,
/// `reason`, `requested_by`), so `journalctl -p warning` shows what needs an admin.
public struct AssetLogEntry: Sendable, Hashable {
    /// Journal priorities the inventory uses (names as the daemon's log levels).
    public enum Priority: String, Sendable {
        /// Routine: installs, removals, repairs.
        case info
        /// A change an admin may want to see: an asset updated.
        case notice
        /// A failure: an install, an update or a catalog source that did not work.
        case warning
    }

    public var priority: Priority
    public var message: String
    public var fields: [String: String]

    public init(_ priority: Priority, _ message: String, fields: [String: String] = [:]) {
        self.priority = priority
        self.message = message
        self.fields = fields
    }
}
