import EarshotSystem
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The sidecar `<destination>.meta` of a partial download: where its bytes came from and the
/// validators a resume must match. Written (atomically) before the first byte of a response, and
/// removed before a restart truncates the partial file, so it never describes bytes it did not see.
struct PartialMetadata: Codable, Hashable, Sendable {
    var url: String
    /// The HTTP entity tag, verbatim (quotes and any `W/` included).
    var etag: String?
    /// The HTTP `Last-Modified` value verbatim; for `file:` the source's mtime in epoch seconds.
    var lastModified: String?
    /// The full size of the remote file, when known.
    var totalSize: Int64?

    enum CodingKeys: String, CodingKey {
        case url, etag
        case lastModified = "last_modified"
        case totalSize = "total_size"
    }

    static func path(for destination: String) -> String { destination + ".meta" }

    /// The validator for `If-Range`: a strong entity tag, else the modification date.
    /// (A weak tag must not be used with `If-Range`, RFC 9110 §13.1.5.)
    var ifRangeValidator: String? {
        if let etag, !etag.hasPrefix("W/") { return etag }
        return lastModified
    }

    /// The sidecar at `path`; nil when missing or unreadable (a garbled sidecar means start over).
    static func load(_ path: String) -> PartialMetadata? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return try? JSONDecoder().decode(PartialMetadata.self, from: data)
    }

    /// Writes the sidecar durably: a temporary file, fsync, rename over `path`.
    func store(_ path: String) throws(SystemError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let bytes = Array((try? encoder.encode(self)) ?? Data())
        let temporary = path + ".tmp"
        let fd = try systemCall("open(\(temporary))") { open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644) }
        defer { close(fd) }
        try PartialFile.writeAll(fd, bytes, at: 0, name: temporary)
        try systemCall("fsync(\(temporary))") { fsync(fd) }
        try systemCall("rename(\(temporary))") { rename(temporary, path) }
    }

    /// Removes the sidecar at `path`, if any.
    static func remove(_ path: String) throws(SystemError) {
        if unlink(path) == -1, errno != ENOENT { throw SystemError("unlink(\(path))", errno: errno) }
    }
}

/// Blocking file helpers for the destination; call them on a ``BlockingWork`` thread.
enum PartialFile {
    /// Writes all of `bytes` at `offset` (pwrite, continuing after short writes).
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int64, name: String) throws(SystemError) {
        var done = 0
        while done < bytes.count {
            let wrote = try systemCall("pwrite(\(name))") {
                pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            }
            done += wrote
        }
    }

    static func writeAll(_ fd: Int32, _ bytes: [UInt8], at offset: Int64, name: String) throws(SystemError) {
        let result = bytes.withUnsafeBytes { buffer in
            Result { () throws(SystemError) in try writeAll(fd, buffer, at: offset, name: name) }
        }
        try result.get()
    }

    /// Size of the file at `path`, nil when it does not exist.
    static func size(_ path: String) throws(SystemError) -> Int64? {
        var info = stat()
        if stat(path, &info) == -1 {
            if errno == ENOENT { return nil }
            throw SystemError("stat(\(path))", errno: errno)
        }
        return Int64(info.st_size)
    }

    /// Bytes an unprivileged writer may still use on the file system holding `path`.
    static func availableBytes(_ path: String) throws(SystemError) -> Int64 {
        var info = statvfs()
        try systemCall("statvfs(\(path))") { statvfs(path, &info) }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }

    /// Like ``availableBytes(_:)`` for an open descriptor.
    static func availableBytes(fd: Int32, name: String) throws(SystemError) -> Int64 {
        var info = statvfs()
        try systemCall("fstatvfs(\(name))") { fstatvfs(fd, &info) }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }

    /// The directory holding `path`.
    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// How many bytes at `destination` a resume may keep, given its sidecar: zero when there is no
    /// sidecar, or it disagrees with the expected size, or the file is longer than the total.
    static func resumableBytes(destination: String, metadata: PartialMetadata?, expectedSize: Int64?) throws(SystemError) -> Int64 {
        guard let metadata, let size = try size(destination), size > 0 else { return 0 }
        if let expectedSize, let total = metadata.totalSize, total != expectedSize { return 0 }
        if let limit = metadata.totalSize ?? expectedSize, size > limit { return 0 }
        return size
    }
}
