@testable import EarshotAssets
import EarshotWire
import Foundation
import Testing
import TestSupport

/// The state database's step migrations (`PRAGMA user_version`): old schemas migrate forward with
/// their data, a failed step changes nothing, and a newer schema than this code knows is refused.
@Suite("Inventory: state database schema")
struct InventorySchemaTests {
    /// A later step, as a future release would append it.
    static let nextStep = "ALTER TABLE reservations ADD COLUMN note TEXT; CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT);"

    func tables(_ db: Database) async throws -> [String] {
        try await db.read { try $0.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").compactMap { $0[0].text } }
    }

    @Test("a database made with only migration 1 opens with every migration, keeping its rows")
    func migratesForward() async throws {
        let directory = try TempDirectory("db")
        defer { directory.remove() }
        let path = directory.file("state.db")
        do {
            let old = try Database(path: path, migrations: Array(Schema.migrations.prefix(1)))
            #expect(try await old.schemaVersion == 1)
            #expect(try await tables(old) == ["catalog_sources", "install_jobs", "installed_assets", "reservations"])
            try await old.write { db in
                try db.execute("INSERT INTO reservations (uid, app_id, locale, created, last_used) VALUES (1000, 'org.example.a', 'en-US', 1, 2)")
            }
        }
        do {
            let current = try Database(path: path, migrations: Schema.migrations)
            #expect(try await current.schemaVersion == Schema.migrations.count)
            #expect(try await current.read { try $0.scalar("SELECT locale FROM reservations WHERE uid = 1000")?.text } == "en-US")
            // Step 4: holds, the last update run, who asked for each unfinished job.
            let names = try await tables(current)
            #expect(names.contains("held_assets") && names.contains("update_runs"))
            #expect(try await current.read { try $0.execute("SELECT requested_by FROM install_jobs").isEmpty })
        }
        do {
            let next = try Database(path: path, migrations: Schema.migrations + [Self.nextStep])
            #expect(try await next.schemaVersion == Schema.migrations.count + 1)
            #expect(try await tables(next).contains("settings"))
            let row = try await next.read { try $0.execute("SELECT locale, note FROM reservations").first }
            #expect(row == [.text("en-US"), .null])
        }
        // Opening again applies nothing twice.
        let reopened = try Database(path: path, migrations: Schema.migrations + [Self.nextStep])
        #expect(try await reopened.schemaVersion == Schema.migrations.count + 1)
    }

    /// Issue 8, defect 4: schema 1 stored absolute paths; step 2 makes every
    /// `<any prefix>/assets/<id>/<version>` relative to the state directory (`assets/<id>/<version>`),
    /// so a state directory moved before the upgrade keeps its assets too. Other paths stay as they
    /// are (start-up repair re-identifies them).
    @Test("migration 2 stores installed paths relative to the state directory, whatever the old prefix")
    func migrationTwoMakesInstalledPathsRelative() async throws {
        let directory = try TempDirectory("db")
        defer { directory.remove() }
        let path = directory.file("state.db")
        do {
            let old = try Database(path: path, migrations: Array(Schema.migrations.prefix(1)))
            try await old.write { db in
                for (id, version, stored) in [("tx-en", 1, "/var/lib/earshot/assets/tx-en/1"), ("tx.de_x", 12, "/old/place/assets/tx.de_x/12"),
                                              ("odd", 1, "/somewhere/odd-1"), ("tx-fr", 2, "/var/lib/earshot/assets/tx-fr/1")] {
                    try db.execute("INSERT INTO installed_assets (id, version, path, bytes, entry, current, installed_at, last_used) VALUES (?, ?, ?, 1, x'7B7D', 1, 0, 0)",
                                   [.text(id), .int(Int64(version)), .text(stored)])
                }
            }
        }
        let current = try Database(path: path, migrations: Schema.migrations)
        let rows = try await current.read { try $0.execute("SELECT id, path FROM installed_assets ORDER BY id").map { "\($0[0].text ?? "") \($0[1].text ?? "")" } }
        #expect(rows == ["odd /somewhere/odd-1", "tx-en assets/tx-en/1", "tx-fr /var/lib/earshot/assets/tx-fr/1", "tx.de_x assets/tx.de_x/12"])
        #expect(try await tables(current).contains("resumable_downloads"))
    }

    @Test("a migration step that fails leaves the schema at the previous version")
    func failedStepRollsBack() async throws {
        let directory = try TempDirectory("db")
        defer { directory.remove() }
        let path = directory.file("state.db")
        _ = try Database(path: path, migrations: Schema.migrations)
        let broken = Schema.migrations + ["CREATE TABLE half (a); THIS IS NOT SQL;"]
        #expect(throws: DatabaseError.self) { try Database(path: path, migrations: broken) }
        let db = try Database(path: path, migrations: Schema.migrations)
        #expect(try await db.schemaVersion == Schema.migrations.count)
        #expect(try await !tables(db).contains("half"))
    }

    @Test("a database from a newer release (higher user_version) is refused")
    func newerSchemaIsRefused() async throws {
        let directory = try TempDirectory("db")
        defer { directory.remove() }
        let path = directory.file("state.db")
        _ = try Database(path: path, migrations: Schema.migrations + [Self.nextStep])
        let error = #expect(throws: DatabaseError.self) { try Database(path: path, migrations: Schema.migrations) }
        #expect(error?.code == 20) // SQLITE_MISMATCH
        #expect(error?.message.contains("newer than this earshotd knows") == true)

        // A user_version far beyond anything known, set directly in a state dir's database.
        let state = directory.file("state")
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        let future = state + "/state.db"
        do {
            let db = try Database(path: future, migrations: Schema.migrations)
            try await db.write { try $0.execute("PRAGMA user_version = 999") }
        }
        #expect(throws: DatabaseError.self) { try Database(path: future, migrations: Schema.migrations) }

        // The asset service refuses to open such a state dir rather than guess.
        #expect(throws: DatabaseError.self) {
            try AssetService(settings: AssetSettings(stateDirectory: state, cacheDirectory: directory.file("cache")))
        }
        // Nothing was changed: the file still claims the newer schema.
        let raw = try Database(path: future, migrations: Array(repeating: "SELECT 1;", count: 999))
        #expect(try await raw.schemaVersion == 999)
    }
}
