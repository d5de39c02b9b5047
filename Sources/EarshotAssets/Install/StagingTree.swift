import EarshotSystem
#if canImport(Glibc)
import Glibc
#endif

/// Descriptor-relative walks over a staging directory: the final check-and-sync pass after
/// extraction and the cleanup after a failure. Nothing here follows a symlink.
enum StagingTree {
    /// What the final pass found.
    struct Summary {
        var files = 0
        /// Paths (components below the root) of every symlink.
        var symlinks: [[String]] = []
    }

    /// Fsyncs every regular file and directory below `root` (then `root` itself, last) and lists the
    /// symlinks and regular files it saw.
    static func syncAll(root: String) throws(SystemError) -> Summary {
        let fd = try systemCall("open(\(root))") { open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        defer { close(fd) }
        var summary = Summary()
        try syncDirectory(fd, path: [], into: &summary)
        return summary
    }

    /// Verifies that every symlink in `summary` resolves, following the links really present on
    /// disk, without ever leaving `root`; returns the first offender's relative path.
    static func firstEscapingLink(root: String, symlinks: [[String]]) throws(SystemError) -> String? {
        if symlinks.isEmpty { return nil }
        let fd = try systemCall("open(\(root))") { open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        defer { close(fd) }
        for link in symlinks where !resolvesInside(rootFD: fd, link: link) {
            return link.joined(separator: "/")
        }
        return nil
    }

    /// Removes everything below `root`, leaving `root` itself (best effort; used on the error path).
    static func removeContents(root: String) {
        let fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0 { return }
        removeChildren(fd)
        close(fd)
    }

    /// Whether `root` is a directory with no entries.
    static func isEmptyDirectory(_ root: String) throws(SystemError) -> Bool {
        let fd = try systemCall("open(\(root))") { open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        defer { close(fd) }
        var empty = true
        try forEachChild(fd) { _ in empty = false }
        return empty
    }

    // MARK: - Walking

    /// Calls `body` with each name in directory `fd` (not `.` or `..`). `fd` stays open and owned by the caller.
    private static func forEachChild(_ fd: Int32, _ body: (String) throws(SystemError) -> Void) throws(SystemError) {
        let copy = try systemCall("dup") { dup(fd) }
        guard let stream = fdopendir(copy) else {
            let code = errno
            close(copy)
            throw SystemError("fdopendir", errno: code)
        }
        defer { closedir(stream) }
        rewinddir(stream)
        var names: [String] = []
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                if errno != 0 { throw SystemError("readdir", errno: errno) }
                break
            }
            let name = withUnsafePointer(to: &entry.pointee.d_name) {
                String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))
            }
            if name != "." && name != ".." { names.append(name) }
        }
        // Collected first so `body` may change the directory while we iterate.
        for name in names { try body(name) }
    }

    private static func syncDirectory(_ fd: Int32, path: [String], into summary: inout Summary) throws(SystemError) {
        try forEachChild(fd) { name throws(SystemError) in
            var info = stat()
            try systemCall("fstatat(\(name))") { fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) }
            switch info.st_mode & S_IFMT {
            case S_IFDIR:
                let child = try systemCall("openat(\(name))") {
                    openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                }
                defer { close(child) }
                try syncDirectory(child, path: path + [name], into: &summary)
            case S_IFREG:
                let child = try systemCall("openat(\(name))") { openat(fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
                defer { close(child) }
                try systemCall("fsync(\(name))") { fsync(child) }
                summary.files += 1
            case S_IFLNK:
                summary.symlinks.append(path + [name])
            default:
                break
            }
        }
        try systemCall("fsync") { fsync(fd) }
    }

    private static func removeChildren(_ fd: Int32) {
        try? forEachChild(fd) { name in
            if unlinkat(fd, name, 0) == 0 { return }
            let child = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard child >= 0 else { return }
            // Make sure its entries can go even if a failure left the directory read-only.
            _ = fchmod(child, 0o700)
            removeChildren(child)
            close(child)
            _ = unlinkat(fd, name, AT_REMOVEDIR)
        }
    }

    // MARK: - Symlink resolution

    /// Resolves symlink `link` the way the kernel would, relative to `rootFD`, expanding every symlink
    /// met on the way (at most 40) and failing as soon as a `..` would climb above the root.
    /// Components that do not exist resolve lexically (the kernel would stop there anyway).
    private static func resolvesInside(rootFD: Int32, link: [String]) -> Bool {
        var resolved = Array(link.dropLast())
        guard let first = readLink(rootFD, link.joined(separator: "/")), !first.hasPrefix("/") else { return false }
        var pending = Array(first.split(separator: "/").map(String.init).reversed())
        var expansions = 0
        var missing = false
        while let part = pending.popLast() {
            if part.isEmpty || part == "." { continue }
            if part == ".." {
                if resolved.isEmpty { return false }
                resolved.removeLast()
                continue
            }
            resolved.append(part)
            if missing { continue }
            var info = stat()
            if fstatat(rootFD, resolved.joined(separator: "/"), &info, AT_SYMLINK_NOFOLLOW) != 0 {
                missing = true
                continue
            }
            guard info.st_mode & S_IFMT == S_IFLNK else { continue }
            expansions += 1
            guard expansions <= 40,
                  let target = readLink(rootFD, resolved.joined(separator: "/")),
                  !target.hasPrefix("/") else { return false }
            resolved.removeLast()
            pending.append(contentsOf: target.split(separator: "/").map(String.init).reversed())
        }
        return true
    }

    private static func readLink(_ fd: Int32, _ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlinkat(fd, path, &buffer, Int(PATH_MAX))
        guard count >= 0 else { return nil }
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
