import EarshotWire
import Foundation

/// Exit codes shared by every Earshot CLI (the update timer relies on 2).
public enum ExitCode: Int32, Sendable {
    case success = 0
    case failure = 1
    case nothingToDo = 2
    /// The command line is wrong (sysexits' EX_USAGE): nothing was sent to a daemon.
    case usage = 64

    /// `earshotctl update`'s status: 1 when something needs an admin (a refused catalog, a
    /// failed asset), else 0 when something changed (or, on a dry run, would), else 2 — also when
    /// no source or mirror was reachable (the timer's next run tries again).
    public init(update reply: UpdateReply) {
        if !reply.failed.isEmpty || reply.catalogs.contains(where: { $0.outcome == "failed" }) {
            self = .failure
        } else {
            self = reply.changed ? .success : .nothingToDo
        }
    }
}

/// Printing helpers for the CLIs: JSON, aligned tables, errors.
public enum Output {
    /// Prints `value` as pretty, key-sorted JSON.
    public static func json<T: Encodable>(_ value: T) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        if let data = try? encoder.encode(value), let text = String(data: data, encoding: .utf8) {
            print(text)
        }
    }

    /// Prints rows as columns aligned under `headers`.
    public static func table(_ headers: [String], _ rows: [[String]]) {
        var widths = headers.map(\.count)
        for row in rows {
            for (i, cell) in row.enumerated() where i < widths.count { widths[i] = max(widths[i], cell.count) }
        }
        for row in [headers] + rows {
            let cells = row.enumerated().map { i, cell in
                i == row.count - 1 ? cell : cell.padding(toLength: widths[i], withPad: " ", startingAt: 0)
            }
            print(cells.joined(separator: "  "))
        }
    }

    /// Prints `label: value` pairs with the values aligned.
    public static func fields(_ pairs: [(String, String)]) {
        let width = pairs.map(\.0.count).max() ?? 0
        for (label, value) in pairs {
            print((label + ":").padding(toLength: width + 1, withPad: " ", startingAt: 0) + " " + value)
        }
    }

    /// Writes `program: message` to stderr.
    public static func error(_ program: String, _ message: String) {
        FileHandle.standardError.write(Data("\(program): \(message)\n".utf8))
    }

    /// Writes a note to stderr (keeps stdout clean for piping).
    public static func note(_ message: String) {
        FileHandle.standardError.write(Data("\(message)\n".utf8))
    }

    /// Seconds as `1d 2h 3m 4s`.
    public static func duration(_ seconds: Double) -> String {
        var rest = Int(seconds)
        var parts: [String] = []
        for (unit, size) in [("d", 86400), ("h", 3600), ("m", 60)] where rest >= size {
            parts.append("\(rest / size)\(unit)")
            rest %= size
        }
        parts.append("\(rest)s")
        return parts.joined(separator: " ")
    }
}
