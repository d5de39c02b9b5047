import CArchive
import EarshotSystem
#if canImport(Glibc)
import Glibc
#endif

/// Unpacks a verified download into a staging directory with libarchive, refusing anything that
/// could write outside staging or outgrow the asset's declared size.
///
/// Every member is checked before libarchive sees it:
/// - names must be relative and free of `..`, and may not pass through a symlink extracted earlier
///   (``ExtractionError/unsafePath(_:)``);
/// - symlinks must be relative and stay inside staging, first lexically when the member is read and
///   again after extraction by resolving every link against the links really on disk, so chains
///   such as `s -> .` plus `l -> s/..` are caught (``ExtractionError/linkEscapes(_:)``);
///   links that stay inside staging are allowed (model packs use them for aliases);
/// - hardlinks are allowed only to a regular file this archive extracted earlier, so they can
///   neither reach outside staging nor alias a directory or symlink; any other hardlink
///   (absolute, `..`, missing or later target, non-file target) is ``ExtractionError/hardlinkRefused(_:)``;
/// - devices, FIFOs and sockets are ``ExtractionError/specialFile(_:)``;
/// - data is copied block by block and counted, so extraction stops with
///   ``ExtractionError/tooLarge(limit:)`` before the real total (whatever the headers claim) passes
///   `maxBytes`; a member whose declared size alone would pass it is refused before it is written;
/// - inodes count too (``ExtractionLimits``): every member is charged at least one block against
///   `maxBytes`, and more than `maxMembers` headers are ``ExtractionError/tooManyMembers(limit:)``,
///   so an archive of countless empty files is refused however few bytes it carries.
///
/// libarchive's own `SECURE_NODOTDOT` and `SECURE_SYMLINKS` guards stay on as a second line.
/// Its `SECURE_NOABSOLUTEPATHS` cannot be: `archive_write_disk` resolves relative names against the
/// process's working directory, which a multi-threaded daemon must not change, so members are
/// written under the (canonicalised) absolute staging path after our own checks refused absolute
/// names. Ownership, setuid/setgid/sticky bits, ACLs, xattrs and file flags are never restored:
/// files become 0644 (0755 if any execute bit was set), directories 0755; modification times are kept.
///
/// After extraction every file and directory, staging included, is fsynced. On any error everything
/// written is removed again (and staging too, if this call created it).
public enum ArchiveExtractor {
    /// Extracts `archive`, packed as `format`, into `staging` (created if missing, else it must be an
    /// empty directory) and returns what was written.
    ///
    /// - Parameters:
    ///   - limits: the most bytes (the asset's declared unpacked size) and members it may write.
    ///   - singleFileName: for ``ArchiveFormat/file``, the plain name the download is copied to.
    ///   - progress: the running count of data bytes written, about every MiB and at the end.
    public static func extract(
        archive: String,
        format: ArchiveFormat,
        into staging: String,
        limits: ExtractionLimits,
        singleFileName: String? = nil,
        progress: ((Int64) -> Void)? = nil
    ) throws(ExtractionError) -> ExtractionResult {
        let (root, created) = try prepare(staging: staging)
        do throws(ExtractionError) {
            let bytes: Int64
            let charged: Int64
            if format == .file {
                guard let name = singleFileName, MemberPath.isPlainName(name) else {
                    throw .unsafePath(singleFileName ?? "")
                }
                bytes = try copyFile(archive, to: root + "/" + name, maxBytes: limits.maxBytes, progress: progress)
                charged = bytes
            } else {
                var session = try Session(archive: archive, format: format, root: root, limits: limits, progress: progress)
                defer { session.close() }
                bytes = try session.run()
                charged = session.charged
            }
            let summary = try io { () throws(SystemError) in try StagingTree.syncAll(root: root) }
            let escaping = try io { () throws(SystemError) in
                try StagingTree.firstEscapingLink(root: root, symlinks: summary.symlinks)
            }
            if let escaping { throw .linkEscapes(escaping) }
            return ExtractionResult(files: summary.files, bytes: bytes, chargedBytes: charged)
        } catch {
            StagingTree.removeContents(root: root)
            if created { _ = rmdir(root) }
            throw error
        }
    }

    /// ``extract(archive:format:into:limits:singleFileName:progress:)`` with the default member
    /// limits (``ExtractionLimits/defaultMaxMembers``, ``ExtractionLimits/defaultBytesPerMember``).
    public static func extract(
        archive: String,
        format: ArchiveFormat,
        into staging: String,
        maxBytes: Int64,
        singleFileName: String? = nil,
        progress: ((Int64) -> Void)? = nil
    ) throws(ExtractionError) -> ExtractionResult {
        try extract(archive: archive, format: format, into: staging, limits: ExtractionLimits(maxBytes: maxBytes),
                    singleFileName: singleFileName, progress: progress)
    }

    /// Creates `staging` if needed and returns its canonical path (no symlinks, so libarchive's
    /// symlink guard can check every component) and whether it was created here.
    private static func prepare(staging: String) throws(ExtractionError) -> (String, Bool) {
        var created = false
        if mkdir(staging, 0o755) == 0 {
            created = true
        } else if errno != EEXIST {
            throw .io(SystemError("mkdir(\(staging))", errno: errno))
        }
        guard let resolved = realpath(staging, nil) else {
            throw .io(SystemError("realpath(\(staging))", errno: errno))
        }
        let root = String(cString: resolved)
        free(resolved)
        if !created {
            let empty = try io { () throws(SystemError) in try StagingTree.isEmptyDirectory(root) }
            if !empty { throw .io(SystemError("extract into \(root)", errno: ENOTEMPTY)) }
        }
        return (root, created)
    }

    /// ``ArchiveFormat/file``: copies the download to `destination`, counting against `maxBytes`.
    private static func copyFile(_ source: String, to destination: String, maxBytes: Int64, progress: ((Int64) -> Void)?) throws(ExtractionError) -> Int64 {
        let input = try io { () throws(SystemError) in
            try systemCall("open(\(source))") { open(source, O_RDONLY | O_CLOEXEC) }
        }
        defer { close(input) }
        _ = posix_fadvise(input, 0, 0, POSIX_FADV_SEQUENTIAL)
        let output = try io { () throws(SystemError) in
            try systemCall("open(\(destination))") { open(destination, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644) }
        }
        defer { close(output) }
        let size = 1 << 20
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 4096)
        defer { buffer.deallocate() }
        var total: Int64 = 0
        while true {
            let count = try io { () throws(SystemError) in try systemCall("read(\(source))") { read(input, buffer, size) } }
            if count == 0 { break }
            if Int64(count) > maxBytes - total { throw .tooLarge(limit: maxBytes) }
            var written = 0
            while written < count {
                written += try io { () throws(SystemError) in
                    try systemCall("write(\(destination))") { write(output, buffer + written, count - written) }
                }
            }
            total += Int64(count)
            progress?(total)
        }
        return total
    }
}

/// Runs `body`, reporting its system error as ``ExtractionError/io(_:)``.
private func io<T>(_ body: () throws(SystemError) -> T) throws(ExtractionError) -> T {
    do {
        return try body()
    } catch {
        throw .io(error)
    }
}

/// One libarchive reader/disk-writer pair and the bookkeeping for the member checks.
private struct Session {
    /// The kinds of member already extracted, keyed by relative path.
    enum Kind { case file, directory, symlink }

    let reader: OpaquePointer
    let writer: OpaquePointer
    let format: ArchiveFormat
    let root: String
    let limits: ExtractionLimits
    let progress: ((Int64) -> Void)?
    var extracted: [String: Kind] = [:]
    /// Data bytes written.
    var total: Int64 = 0
    /// What the finished members were charged against `limits.maxBytes`.
    var charged: Int64 = 0
    /// Headers read.
    var members = 0
    var reported: Int64 = 0

    var maxBytes: Int64 { limits.maxBytes }

    static let readBlockSize = 256 << 10
    static let reportEvery: Int64 = 1 << 20
    static let writeFlags = ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_TIME

    init(archive: String, format: ArchiveFormat, root: String, limits: ExtractionLimits, progress: ((Int64) -> Void)?) throws(ExtractionError) {
        guard let reader = archive_read_new() else { throw .io(SystemError("archive_read_new", errno: ENOMEM)) }
        guard let writer = archive_write_disk_new() else {
            archive_read_free(reader)
            throw .io(SystemError("archive_write_disk_new", errno: ENOMEM))
        }
        self.reader = reader
        self.writer = writer
        self.format = format
        self.root = root
        self.limits = limits
        self.progress = progress

        // Only the declared filter and format are enabled; `run` also checks they were the ones used.
        switch format {
        case .tarGz: archive_read_support_filter_gzip(reader)
        case .tarBz2: archive_read_support_filter_bzip2(reader)
        case .tarZst: archive_read_support_filter_zstd(reader)
        case .zip, .file: break
        }
        if format == .zip { archive_read_support_format_zip(reader) } else { archive_read_support_format_tar(reader) }
        archive_write_disk_set_options(writer, Self.writeFlags)

        if archive_read_open_filename(reader, archive, Self.readBlockSize) != ARCHIVE_OK {
            let code = archive_errno(reader)
            let message = Self.message(reader)
            close()
            throw Self.isSystemErrno(code) ? .io(SystemError("archive_read_open_filename(\(archive))", errno: code)) : .corrupt(message)
        }
    }

    func close() {
        archive_read_free(reader)
        archive_write_free(writer)
    }

    /// Extracts every member and returns the data bytes written.
    mutating func run() throws(ExtractionError) -> Int64 {
        var first = true
        while true {
            var entryPointer: OpaquePointer?
            let status = archive_read_next_header(reader, &entryPointer)
            if first {
                first = false
                try checkDetectedFormat(status)
            }
            if status == ARCHIVE_EOF { break }
            // `ARCHIVE_RETRY` (a damaged header libarchive could skip) is as fatal as the rest.
            guard status == ARCHIVE_OK || status == ARCHIVE_WARN, let entry = entryPointer else {
                throw .corrupt(Self.message(reader))
            }
            members += 1
            if members > limits.maxMembers { throw .tooManyMembers(limit: limits.maxMembers) }
            try extract(entry)
        }
        if archive_write_close(writer) < ARCHIVE_WARN { throw writeFailure("archive_write_close") }
        if total != reported { progress?(total) }
        return total
    }

    /// Refuses an archive whose compression or container is not the declared one (say a plain tar
    /// labelled `tar.gz`).
    private func checkDetectedFormat(_ status: Int32) throws(ExtractionError) {
        // A failed first read is reported by the caller with libarchive's own message.
        guard status == ARCHIVE_OK || status == ARCHIVE_WARN || status == ARCHIVE_EOF else { return }
        let expectedFilter: Int32 = switch format {
        case .tarGz: ARCHIVE_FILTER_GZIP
        case .tarBz2: ARCHIVE_FILTER_BZIP2
        case .tarZst: ARCHIVE_FILTER_ZSTD
        case .zip, .file: ARCHIVE_FILTER_NONE
        }
        let filter = archive_filter_code(reader, 0)
        if filter != expectedFilter {
            throw .corrupt("not a \(format.rawValue) archive (\(String(cString: archive_filter_name(reader, 0))) compression)")
        }
        let container = archive_format(reader) & ARCHIVE_FORMAT_BASE_MASK
        let expectedContainer = format == .zip ? ARCHIVE_FORMAT_ZIP : ARCHIVE_FORMAT_TAR
        if status != ARCHIVE_EOF && container != expectedContainer {
            throw .corrupt("not a \(format.rawValue) archive")
        }
    }

    private mutating func extract(_ entry: OpaquePointer) throws(ExtractionError) {
        guard let rawName = archive_entry_pathname(entry) else { throw .corrupt("member without a name") }
        guard let name = String(validatingCString: rawName) else {
            throw .unsafePath(String(decoding: Self.bytes(rawName), as: UTF8.self))
        }
        let parts = try MemberPath.components(name)
        let relative = parts.joined(separator: "/")
        try refuseSymlinkedParents(parts, member: name)

        if let rawTarget = archive_entry_hardlink(entry) {
            guard let target = String(validatingCString: rawTarget),
                  let targetParts = try? MemberPath.components(target),
                  !targetParts.isEmpty,
                  extracted[targetParts.joined(separator: "/")] == .file,
                  !hasSymlinkedParent(targetParts),
                  !parts.isEmpty
            else { throw .hardlinkRefused(name) }
            archive_entry_set_perm(entry, Self.safeFilePerm(entry))
            archive_entry_copy_hardlink(entry, root + "/" + targetParts.joined(separator: "/"))
            archive_entry_copy_pathname(entry, root + "/" + relative)
            try writeMember(entry, relative: relative, declared: archive_entry_size_is_set(entry) != 0 ? archive_entry_size(entry) : 0)
            extracted[relative] = .file
            return
        }

        let type = archive_entry_filetype(entry) & S_IFMT
        switch type {
        case S_IFDIR:
            // `./` names staging itself, which already exists.
            if parts.isEmpty { return }
            archive_entry_set_perm(entry, 0o755)
            archive_entry_copy_pathname(entry, root + "/" + relative)
            try writeMember(entry, relative: relative, declared: 0)
            extracted[relative] = .directory
        case S_IFREG:
            if parts.isEmpty { throw .unsafePath(name) }
            archive_entry_set_perm(entry, Self.safeFilePerm(entry))
            archive_entry_copy_pathname(entry, root + "/" + relative)
            try writeMember(entry, relative: relative, declared: archive_entry_size_is_set(entry) != 0 ? archive_entry_size(entry) : 0)
            extracted[relative] = .file
        case S_IFLNK:
            if parts.isEmpty { throw .unsafePath(name) }
            guard let rawTarget = archive_entry_symlink(entry),
                  let target = String(validatingCString: rawTarget),
                  MemberPath.staysInside(target: target, from: Array(parts.dropLast()))
            else { throw .linkEscapes(name) }
            archive_entry_copy_pathname(entry, root + "/" + relative)
            try writeMember(entry, relative: relative, declared: 0)
            extracted[relative] = .symlink
        default:
            throw .specialFile(name)
        }
    }

    /// 0755 if the member has any execute bit, else 0644: no setuid/setgid/sticky, no group/other
    /// write, always owner-writable (so cleanup can remove it).
    private static func safeFilePerm(_ entry: OpaquePointer) -> mode_t {
        archive_entry_perm(entry) & 0o111 != 0 ? 0o755 : 0o644
    }

    /// Refuses a member below a path this archive made a symlink (libarchive would too, but this
    /// gives the precise error first).
    private func refuseSymlinkedParents(_ parts: [String], member: String) throws(ExtractionError) {
        if hasSymlinkedParent(parts) { throw .unsafePath(member) }
    }

    private func hasSymlinkedParent(_ parts: [String]) -> Bool {
        var prefix = ""
        for part in parts.dropLast() {
            prefix = prefix.isEmpty ? part : prefix + "/" + part
            if extracted[prefix] == .symlink { return true }
        }
        return false
    }

    /// Writes the header, then copies and counts the data blocks; the member is charged its data,
    /// but at least one block (``ExtractionLimits/charge(_:)``).
    private mutating func writeMember(_ entry: OpaquePointer, relative: String, declared: Int64) throws(ExtractionError) {
        if limits.charge(declared) > maxBytes - charged { throw .tooLarge(limit: maxBytes) }
        var memberBytes: Int64 = 0
        if archive_write_header(writer, entry) < ARCHIVE_WARN { throw writeFailure("archive_write_header(\(relative))") }
        var buffer: UnsafeRawPointer?
        var size = 0
        var offset: la_int64_t = 0
        while true {
            let status = archive_read_data_block(reader, &buffer, &size, &offset)
            if status == ARCHIVE_EOF { break }
            // Warnings here are checksum or size mismatches: the data is not what the archive says.
            guard status == ARCHIVE_OK else { throw .corrupt(Self.message(reader)) }
            if limits.charge(memberBytes + Int64(size)) > maxBytes - charged { throw .tooLarge(limit: maxBytes) }
            if size > 0, let buffer {
                // libarchive reports both a failed write(2) (ENOSPC, EIO) and "more data than the header
                // said" as ARCHIVE_WARN: within the declared size a warning is a failed write and fatal;
                // beyond it, the lie is caught by counting real bytes.
                let written = archive_write_data_block(writer, buffer, size, offset)
                if written < ARCHIVE_WARN || (written == ARCHIVE_WARN && Int64(offset) + Int64(size) <= declared) {
                    throw writeFailure("archive_write_data_block(\(relative))")
                }
            }
            total += Int64(size)
            memberBytes += Int64(size)
            if total - reported >= Self.reportEvery {
                reported = total
                progress?(total)
            }
        }
        if archive_write_finish_entry(writer) < ARCHIVE_WARN { throw writeFailure("archive_write_finish_entry(\(relative))") }
        charged += limits.charge(memberBytes)
    }

    /// A disk-side failure: a real `errno` is an I/O error, anything else libarchive refused.
    private func writeFailure(_ function: String) -> ExtractionError {
        let code = archive_errno(writer)
        return Self.isSystemErrno(code) ? .io(SystemError(function, errno: code)) : .corrupt(Self.message(writer))
    }

    /// Whether libarchive's `archive_errno` came from the system rather than its own pseudo-codes
    /// (`ARCHIVE_ERRNO_FILE_FORMAT` is `EILSEQ`, `ARCHIVE_ERRNO_PROGRAMMER` `EINVAL`, `ARCHIVE_ERRNO_MISC` -1).
    private static func isSystemErrno(_ code: Int32) -> Bool {
        code > 0 && code != EILSEQ && code != EINVAL
    }

    private static func message(_ archive: OpaquePointer) -> String {
        guard let text = archive_error_string(archive) else { return "unknown libarchive error" }
        return String(cString: text)
    }

    private static func bytes(_ text: UnsafePointer<CChar>) -> [UInt8] {
        Array(UnsafeBufferPointer(start: text, count: strlen(text))).map { UInt8(bitPattern: $0) }
    }
}
