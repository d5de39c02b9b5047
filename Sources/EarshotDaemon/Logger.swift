import CSystemd
import Dispatch
import Foundation

/// Severity, as syslog priorities.
public enum LogLevel: String, CaseIterable, Sendable, Comparable {
    case debug, info, notice, warning, error

    var priority: Int32 {
        switch self {
        case .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        }
    }

    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.priority > b.priority }
}

/// Structured logging to the journal (when stderr is connected to it, per `JOURNAL_STREAM`) or to
/// stderr. Writes happen on a serial queue, never on the caller's thread.
public struct Logger: Sendable {
    enum Sink: Sendable {
        case journal
        case stderr
    }

    let minimum: LogLevel
    let sink: Sink
    private static let queue = DispatchQueue(label: "earshot.log")

    public init(minimum: LogLevel, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.minimum = minimum
        sink = Self.stderrIsJournal(environment) ? .journal : .stderr
    }

    /// systemd sets `JOURNAL_STREAM=dev:ino` for the stderr it connected to the journal.
    static func stderrIsJournal(_ environment: [String: String]) -> Bool {
        guard let value = environment["JOURNAL_STREAM"] else { return false }
        let parts = value.split(separator: ":").compactMap { UInt64($0) }
        var st = stat()
        guard parts.count == 2, fstat(2, &st) == 0 else { return false }
        return UInt64(st.st_dev) == parts[0] && UInt64(st.st_ino) == parts[1]
    }

    /// Logs `message` with extra journal fields (`EARSHOT_…` names, upper-case).
    public func log(_ level: LogLevel, _ message: String, _ fields: [String: String] = [:]) {
        guard level >= minimum else { return }
        let sink = sink
        Self.queue.async {
            switch sink {
            case .journal:
                var entries = ["MESSAGE=\(message)", "PRIORITY=\(level.priority)", "SYSLOG_IDENTIFIER=earshotd"]
                entries += fields.sorted { $0.key < $1.key }.map { "EARSHOT_\($0.key.uppercased())=\($0.value)" }
                let buffers = entries.map { Array($0.utf8) }
                buffers.withUnsafeIOVecs { iov in _ = sd_journal_sendv(iov.baseAddress, Int32(iov.count)) }
            case .stderr:
                let extra = fields.isEmpty ? "" : " " + fields.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
                FileHandle.standardError.write(Data("earshotd[\(level.rawValue)]: \(message)\(extra)\n".utf8))
            }
        }
    }

    public func debug(_ message: String, _ fields: [String: String] = [:]) { log(.debug, message, fields) }
    public func info(_ message: String, _ fields: [String: String] = [:]) { log(.info, message, fields) }
    public func notice(_ message: String, _ fields: [String: String] = [:]) { log(.notice, message, fields) }
    public func warning(_ message: String, _ fields: [String: String] = [:]) { log(.warning, message, fields) }
    public func error(_ message: String, _ fields: [String: String] = [:]) { log(.error, message, fields) }

    /// Waits until everything logged so far is written (before exit).
    public func flush() {
        Self.queue.sync {}
    }
}

extension Array where Element == [UInt8] {
    /// Calls `body` with an iovec per element, valid for the duration of the call.
    fileprivate func withUnsafeIOVecs<R>(_ body: (UnsafeBufferPointer<iovec>) -> R) -> R {
        var pointers: [UnsafeMutableRawPointer] = []
        defer { pointers.forEach { $0.deallocate() } }
        var iovecs: [iovec] = []
        for bytes in self {
            let p = UnsafeMutableRawPointer.allocate(byteCount: Swift.max(bytes.count, 1), alignment: 1)
            bytes.withUnsafeBytes { p.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
            pointers.append(p)
            iovecs.append(iovec(iov_base: p, iov_len: bytes.count))
        }
        return iovecs.withUnsafeBufferPointer(body)
    }
}
