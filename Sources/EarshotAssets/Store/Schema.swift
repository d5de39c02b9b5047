/// The state database's schema, as step migrations: entry i moves version i to i+1. Append only;
/// never edit a shipped step (tests open old-schema fixtures and migrate them).
enum Schema {
    static let migrations: [String] = [
        // 1: catalogs, installed assets, reservations, install jobs.
        """
        CREATE TABLE catalog_sources (
            url TEXT PRIMARY KEY,
            version INTEGER NOT NULL,
            body BLOB NOT NULL,
            signature TEXT NOT NULL,
            key_id TEXT NOT NULL,
            etag TEXT,
            last_modified TEXT,
            fetched_at REAL NOT NULL
        );
        CREATE TABLE installed_assets (
            id TEXT NOT NULL,
            version INTEGER NOT NULL,
            path TEXT NOT NULL,
            bytes INTEGER NOT NULL,
            entry TEXT NOT NULL,
            current INTEGER NOT NULL,
            installed_at REAL NOT NULL,
            last_used REAL NOT NULL,
            unneeded_since REAL,
            PRIMARY KEY (id, version)
        );
        CREATE TABLE reservations (
            uid INTEGER NOT NULL,
            app_id TEXT NOT NULL,
            locale TEXT NOT NULL,
            created REAL NOT NULL,
            last_used REAL NOT NULL,
            PRIMARY KEY (uid, app_id, locale)
        );
        CREATE TABLE install_jobs (
            id TEXT NOT NULL,
            version INTEGER NOT NULL,
            entry TEXT NOT NULL,
            bandwidth_limit INTEGER,
            is_update INTEGER NOT NULL,
            created REAL NOT NULL,
            PRIMARY KEY (id, version)
        );
        """,
    ]
}
