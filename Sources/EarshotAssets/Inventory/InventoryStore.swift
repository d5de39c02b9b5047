import Foundation

/// The asset service's state database: ``Database``'s reads and writes on its serial queue, with
/// SQLite failures turned into ``AssetError``s (a full filesystem is `insufficientStorage`), so no
/// raw database error leaves the inventory. Errors the bodies throw themselves pass unchanged.
struct InventoryStore: Sendable {
    let database: Database
    /// The state directory, named in errors.
    let directory: String

    /// Opens `directory/state.db`, migrating it to ``Schema/migrations``. Throws ``DatabaseError``
    /// (callers refuse to start on a database they cannot open or that is newer than they know).
    init(directory: String) throws {
        self.directory = directory
        database = try Database(path: directory + "/state.db", migrations: Schema.migrations)
    }

    /// ``Database/write(_:)``: one IMMEDIATE transaction, rolled back if `body` throws.
    @discardableResult
    func write<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        do {
            return try await database.write(body)
        } catch let error as DatabaseError {
            throw AssetError(error, database: directory)
        }
    }

    /// ``Database/read(_:)``.
    func read<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        do {
            return try await database.read(body)
        } catch let error as DatabaseError {
            throw AssetError(error, database: directory)
        }
    }
}
