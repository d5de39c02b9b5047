import EarshotSystem
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An `installed_assets` row: the asset (its path resolved) and the path as stored.
struct RecordedInstall: Sendable {
    var asset: InstalledAsset
    var storedPath: String
}

/// A recorded asset whose tree is not where its row says, found at `found`; repair moves it to
/// `canonical` (when it is not there already) and points the row at it.
struct ReidentifiedInstall: Sendable {
    var asset: InstalledAsset
    var found: String
    var canonical: String
}

/// What ``StoreScan/consistency(of:assetsDirectory:committing:reidentify:)`` found.
struct ConsistencyScan: Sendable {
    /// Rows whose tree is missing and was not found anywhere else.
    var lost: [InstalledAsset] = []
    /// Rows whose tree was found elsewhere.
    var reidentified: [ReidentifiedInstall] = []
    /// Trees in `state/assets/<id>/<version>` that no row records (and no job is committing).
    var unrecorded: [String] = []
}

/// One name in the download cache with its sidecars (`.meta`, `.meta.tmp`).
struct CachedDownload: Sendable, Hashable {
    var name: String
    /// Bytes of the file and its sidecars.
    var bytes: Int64
}

/// What ``StoreScan/sweepDownloads(_:keeping:dryRun:)`` found.
struct DownloadSweep: Sendable {
    /// Entries no one needs (removed unless it was a dry run).
    var orphans: [CachedDownload] = []
    /// Names (without sidecar suffixes) whose download file exists, kept or not.
    var present: Set<String> = []
}

/// The blocking file-system side of consistency checks, repair and the download-cache sweep; run
/// on a ``BlockingWork`` thread, never on the actor.
enum StoreScan {
    // MARK: Installed trees

    /// Compares `recorded` rows with the trees in `assetsDirectory`. With `reidentify`, a row whose
    /// tree is missing claims an unrecorded tree instead of being lost: the tree at its own
    /// `assets/<id>/<version>` when its stored path differs only by the state directory prefix or
    /// its content matches, else any unrecorded tree whose content matches
    /// (``contentMatches(_:_:)``).
    static func consistency(of recorded: [RecordedInstall], assetsDirectory: String, committing: Set<String>, reidentify: Bool) -> ConsistencyScan {
        let fm = FileManager.default
        let known = Set(recorded.map(\.asset.path))
        var scan = ConsistencyScan()
        for id in ((try? fm.contentsOfDirectory(atPath: assetsDirectory)) ?? []).sorted() {
            let dir = assetsDirectory + "/" + id
            // A running job renames its tree into place just before committing the row.
            for version in ((try? fm.contentsOfDirectory(atPath: dir)) ?? []).sorted()
            where !known.contains(dir + "/" + version) && !committing.contains("\(id)@\(version)") {
                scan.unrecorded.append(dir + "/" + version)
            }
        }
        for row in recorded where !exists(row.asset.path) {
            let asset = row.asset
            let canonical = assetsDirectory + "/\(asset.entry.id)/\(asset.entry.version)"
            if reidentify {
                let suffix = "/assets/\(asset.entry.id)/\(asset.entry.version)"
                if let index = scan.unrecorded.firstIndex(of: canonical),
                   row.storedPath.hasSuffix(suffix) || contentMatches(canonical, asset) {
                    scan.unrecorded.remove(at: index)
                    scan.reidentified.append(ReidentifiedInstall(asset: asset, found: canonical, canonical: canonical))
                    continue
                }
                if !exists(canonical), let index = scan.unrecorded.firstIndex(where: { contentMatches($0, asset) }) {
                    let found = scan.unrecorded.remove(at: index)
                    scan.reidentified.append(ReidentifiedInstall(asset: asset, found: found, canonical: canonical))
                    continue
                }
            }
            scan.lost.append(asset)
        }
        return scan
    }

    /// Whether the tree at `path` is `asset`'s: every file its entry names is there, and its
    /// regular files (each inode once) hold exactly the bytes recorded at install.
    static func contentMatches(_ path: String, _ asset: InstalledAsset) -> Bool {
        guard asset.entry.files.values.allSatisfy({ exists(path + "/" + $0) }) else { return false }
        return treeBytes(path) == asset.bytes
    }

    /// Data bytes of the regular files below `root`, each inode counted once; symlinks not followed.
    static func treeBytes(_ root: String) -> Int64? {
        guard let names = FileManager.default.enumerator(atPath: root) else { return nil }
        var seen = Set<[UInt64]>()
        var total: Int64 = 0
        for case let name as String in names {
            var info = stat()
            guard lstat(root + "/" + name, &info) == 0 else { return nil }
            if info.st_mode & S_IFMT == S_IFREG, seen.insert([UInt64(info.st_dev), UInt64(info.st_ino)]).inserted {
                total += Int64(info.st_size)
            }
        }
        return total
    }

    /// Moves each re-identified tree found elsewhere to its canonical place (durably).
    static func moveIntoPlace(_ reidentified: [ReidentifiedInstall]) throws {
        for item in reidentified where item.found != item.canonical {
            let parent = (item.canonical as NSString).deletingLastPathComponent
            try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
            try systemCall("rename(\(item.found))") { rename(item.found, item.canonical) }
            try AssetService.syncDirectory(parent)
        }
    }

    /// Removes `trees`, then every `assets/<id>` left empty.
    static func remove(_ trees: [String], assetsDirectory: String) throws {
        let fm = FileManager.default
        for tree in trees { try fm.removeItem(atPath: tree) }
        for id in (try? fm.contentsOfDirectory(atPath: assetsDirectory)) ?? [] {
            let dir = assetsDirectory + "/" + id
            if (try? fm.contentsOfDirectory(atPath: dir))?.isEmpty == true { try fm.removeItem(atPath: dir) }
        }
    }

    static func exists(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0
    }

    // MARK: Download cache

    /// The download-cache name `file` belongs to (sidecars `.meta` and `.meta.tmp` belong to theirs).
    static func downloadName(_ file: String) -> String {
        for suffix in [".meta.tmp", ".meta"] where file.hasSuffix(suffix) && file.count > suffix.count {
            return String(file.dropLast(suffix.count))
        }
        return file
    }

    /// Finds (and unless `dryRun` removes) every entry of the download cache `directory` whose name
    /// is not in `keeping`, sidecars included. A download still locked by a transfer (the
    /// downloader holds `flock` on it) is left alone.
    static func sweepDownloads(_ directory: String, keeping: Set<String>, dryRun: Bool) -> DownloadSweep {
        let fm = FileManager.default
        var groups: [String: [String]] = [:]
        for file in (try? fm.contentsOfDirectory(atPath: directory)) ?? [] {
            groups[downloadName(file), default: []].append(file)
        }
        var sweep = DownloadSweep()
        for (name, files) in groups.sorted(by: { $0.key < $1.key }) {
            var info = stat()
            if lstat(directory + "/" + name, &info) == 0, info.st_mode & S_IFMT == S_IFREG { sweep.present.insert(name) }
            guard !keeping.contains(name) else { continue }
            let bytes = files.reduce(Int64(0)) { $0 + (entryBytes(directory + "/" + $1) ?? 0) }
            if !dryRun {
                guard removeUnlessLocked(directory: directory, name: name, files: files) else { continue }
            }
            sweep.orphans.append(CachedDownload(name: name, bytes: bytes))
        }
        return sweep
    }

    /// Bytes of a cache entry (a directory planted there counts its whole tree).
    private static func entryBytes(_ path: String) -> Int64? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        if info.st_mode & S_IFMT == S_IFDIR { return treeBytes(path) }
        return Int64(info.st_size)
    }

    /// Removes `files` of the entry `name`, holding the download's lock meanwhile; false when a
    /// transfer holds it (or removing failed).
    private static func removeUnlessLocked(directory: String, name: String, files: [String]) -> Bool {
        let path = directory + "/" + name
        var info = stat()
        var fd: Int32 = -1
        if lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG {
            fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
            if fd >= 0, flock(fd, LOCK_EX | LOCK_NB) != 0 {
                close(fd)
                return false
            }
        }
        defer { if fd >= 0 { close(fd) } }
        for file in files {
            var entry = stat()
            let target = directory + "/" + file
            guard lstat(target, &entry) == 0 else { continue }
            if entry.st_mode & S_IFMT == S_IFDIR {
                guard (try? FileManager.default.removeItem(atPath: target)) != nil else { return false }
            } else if unlink(target) != 0, errno != ENOENT {
                return false
            }
        }
        return true
    }
}
