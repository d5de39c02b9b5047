import CSQLite
import Dispatch
import Foundation

/// A value bound to or read from SQLite.
public enum SQLValue: Sendable, Hashable {
    case null
    case int(Int64)
    case double(Double)
    case text(String)
    case blob([UInt8])

    public var int: Int64? { if case .int(let v) = self { v } else { nil } }
    public var double: Double? {
        switch self {
        case .double(let v): v
        case .int(let v): Double(v)
        default: nil
        }
    }
    public var text: String? { if case .text(let v) = self { v } else { nil } }
    public var blob: [UInt8]? {
        switch self {
        case .blob(let v): v
        case .text(let v): Array(v.utf8)
        default: nil
        }
    }
}

/// A failed SQLite call: the function, SQLite's (extended) result code and message, and the
/// `errno` of the system call that failed underneath, if any.
public struct DatabaseError: Error, Sendable, Hashable, CustomStringConvertible {
    public var function: String
    /// The extended result code (`SQLITE_IOERR_WRITE`, …); ``primaryCode`` is its low byte.
    public var code: Int32
    public var message: String
    /// `sqlite3_system_errno` after the failure (0 when no system call failed).
    public var systemErrno: Int32

    public init(function: String, code: Int32, message: String, systemErrno: Int32 = 0) {
        self.function = function
        self.code = code
        self.message = message
        self.systemErrno = systemErrno
    }

    /// The primary result code (`SQLITE_FULL`, `SQLITE_IOERR`, …).
    public var primaryCode: Int32 { code & 0xFF }

    /// Whether the filesystem holding the database is out of space or quota: `SQLITE_FULL`
    /// ("database or disk is full"), or an I/O error whose system call failed with `ENOSPC`/`EDQUOT`.
    public var isStorageFull: Bool {
        primaryCode == SQLITE_FULL || systemErrno == ENOSPC || systemErrno == EDQUOT
    }

    public var description: String {
        "\(function): \(message) (SQLite \(code)\(systemErrno != 0 ? ", errno \(systemErrno)" : ""))"
    }
}

/// State stored in SQLite through one handle owned by a serial queue: every statement runs there,
/// never on the cooperative pool. WAL journal; each `write` is one IMMEDIATE transaction.
public final class Database: @unchecked Sendable {
    private let handle: OpaquePointer
    private let queue = DispatchQueue(label: "earshot.database")

    /// Opens (creating) the database at `path`; `:memory:` for tests. Applies `migrations` in order:
    /// `migrations[i]` moves the schema from version i to i+1 (`PRAGMA user_version`).
    public init(path: String, migrations: [String]) throws {
        var db: OpaquePointer?
        let rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            let system = db.map { sqlite3_system_errno($0) } ?? 0
            sqlite3_close(db)
            throw DatabaseError(function: "sqlite3_open_v2(\(path))", code: rc, message: message, systemErrno: system)
        }
        handle = db
        let connection = SQLiteConnection(handle: db)
        do {
            sqlite3_extended_result_codes(db, 1)
            sqlite3_busy_timeout(db, 5000)
            try connection.execute("PRAGMA journal_mode=WAL")
            try connection.execute("PRAGMA synchronous=FULL")
            try connection.execute("PRAGMA foreign_keys=ON")
            try Self.migrate(connection, migrations)
        } catch {
            sqlite3_close(db)
            throw error
        }
    }

    deinit { sqlite3_close(handle) }

    /// The schema version after migrations.
    public var schemaVersion: Int {
        get async throws {
            try await read { Int(try $0.scalar("PRAGMA user_version")?.int ?? 0) }
        }
    }

    static func migrate(_ connection: SQLiteConnection, _ migrations: [String]) throws {
        let current = Int(try connection.scalar("PRAGMA user_version")?.int ?? 0)
        guard current <= migrations.count else {
            throw DatabaseError(function: "migrate", code: SQLITE_MISMATCH, message: "database schema \(current) is newer than this earshotd knows (\(migrations.count))")
        }
        for version in current..<migrations.count {
            try connection.transaction {
                try connection.executeScript(migrations[version])
                try connection.execute("PRAGMA user_version=\(version + 1)")
            }
        }
    }

    @discardableResult
    /// Runs `body` in one IMMEDIATE transaction on the database queue; rolls back if it throws.
    public func write<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        try await run { connection in try connection.transaction { try body(connection) } }
    }

    /// Runs `body` on the database queue without a write transaction.
    public func read<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        try await run(body)
    }

    private func run<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { [self] in
                continuation.resume(with: Result { try body(SQLiteConnection(handle: handle)) })
            }
        }
    }
}

/// Statement execution on the database queue. Only ever used inside `Database.read`/`write`.
public struct SQLiteConnection {
    let handle: OpaquePointer

    /// Runs one statement with `parameters` bound to `?` placeholders; returns all rows.
    @discardableResult
    public func execute(_ sql: String, _ parameters: [SQLValue] = []) throws -> [[SQLValue]] {
        var statement: OpaquePointer?
        try check("sqlite3_prepare_v2", sqlite3_prepare_v2(handle, sql, -1, &statement, nil))
        defer { sqlite3_finalize(statement) }
        for (index, value) in parameters.enumerated() {
            let i = Int32(index + 1)
            let rc: Int32 = switch value {
            case .null: sqlite3_bind_null(statement, i)
            case .int(let v): sqlite3_bind_int64(statement, i, v)
            case .double(let v): sqlite3_bind_double(statement, i, v)
            case .text(let v): sqlite3_bind_text(statement, i, v, -1, CSQLite_transient())
            case .blob(let v): v.withUnsafeBytes { sqlite3_bind_blob(statement, i, $0.baseAddress, Int32($0.count), CSQLite_transient()) }
            }
            try check("sqlite3_bind", rc)
        }
        var rows: [[SQLValue]] = []
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else { try check("sqlite3_step", rc); break }
            rows.append((0..<sqlite3_column_count(statement)).map { column(statement, $0) })
        }
        return rows
    }

    /// The first column of the first row, if any.
    public func scalar(_ sql: String, _ parameters: [SQLValue] = []) throws -> SQLValue? {
        try execute(sql, parameters).first?.first
    }

    /// Runs several `;`-separated statements without parameters.
    public func executeScript(_ sql: String) throws {
        var error: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &error)
        if rc != SQLITE_OK {
            let message = error.map { String(cString: $0) } ?? "error"
            sqlite3_free(error)
            throw DatabaseError(function: "sqlite3_exec", code: rc, message: message, systemErrno: sqlite3_system_errno(handle))
        }
    }

    /// Rows changed by the last statement.
    public var changes: Int { Int(sqlite3_changes(handle)) }

    func transaction<T>(_ body: () throws -> T) throws -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            _ = try? execute("ROLLBACK")
            throw error
        }
    }

    private func column(_ statement: OpaquePointer?, _ index: Int32) -> SQLValue {
        switch sqlite3_column_type(statement, index) {
        case SQLITE_INTEGER: return .int(sqlite3_column_int64(statement, index))
        case SQLITE_FLOAT: return .double(sqlite3_column_double(statement, index))
        case SQLITE_TEXT: return .text(String(cString: sqlite3_column_text(statement, index)))
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(statement, index))
            guard count > 0, let bytes = sqlite3_column_blob(statement, index) else { return .blob([]) }
            return .blob(Array(UnsafeRawBufferPointer(start: bytes, count: count)))
        default: return .null
        }
    }

    private func check(_ function: String, _ rc: Int32) throws {
        guard rc == SQLITE_OK || rc == SQLITE_ROW || rc == SQLITE_DONE else {
            throw DatabaseError(function: function, code: rc, message: String(cString: sqlite3_errmsg(handle)), systemErrno: sqlite3_system_errno(handle))
        }
    }
}
