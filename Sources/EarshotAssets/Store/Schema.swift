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
        // 2: installed paths relative to the state directory (so it can move): every absolute
        // `<old state dir>/assets/<id>/<version>` becomes `assets/<id>/<version>`, whatever the old
        // prefix. Partial downloads kept for a later resume (installs cancelled mid-way), keyed by
        // their cache name; the download cache sweep keeps only these and those of pending jobs.
        """
        UPDATE installed_assets SET path = 'assets/' || id || '/' || version
            WHERE substr(path, 1, 1) = '/'
              AND substr(path, -length('/assets/' || id || '/' || version)) = '/assets/' || id || '/' || version;
        CREATE TABLE resumable_downloads (
            sha256 TEXT PRIMARY KEY,
            id TEXT NOT NULL,
            version INTEGER NOT NULL,
            since REAL NOT NULL
        );
        """,
        // 3: downloads that failed their size or SHA-256 check, by the catalog entry's SHA-256,
        // with the catalogs' versions at the time: the entry is not fetched again until they change.
        """
        CREATE TABLE failed_downloads (
            sha256 TEXT PRIMARY KEY,
            id TEXT NOT NULL,
            version INTEGER NOT NULL,
            catalogs TEXT NOT NULL,
            reason TEXT NOT NULL,
            since REAL NOT NULL
        );
        """,
        // 4: holds (an asset pinned at its installed version: updates skip it) with who asked,
        // the last real update run (one row) for `earshotctl status`, and who asked for each
        // unfinished job (named in its log line when a later start resumes it).
        """
        ALTER TABLE install_jobs ADD COLUMN requested_by TEXT;
        CREATE TABLE held_assets (
            id TEXT PRIMARY KEY,
            version INTEGER NOT NULL,
            since REAL NOT NULL,
            held_by TEXT NOT NULL
        );
        CREATE TABLE update_runs (
            slot INTEGER PRIMARY KEY CHECK (slot = 1),
            finished_at REAL NOT NULL,
            requested_by TEXT NOT NULL,
            outcome TEXT NOT NULL,
            summary TEXT NOT NULL
        );
        """,
    ]
}
