import EarshotSystem

/// Why ``ArchiveExtractor`` refused or failed an archive. Whatever the case, nothing the call wrote is left.
public enum ExtractionError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A member name that is absolute, contains `..`, passes through a symlink, or a bad single-file name.
    case unsafePath(String)
    /// A symlink (named by its member path) whose target is absolute or resolves outside staging.
    case linkEscapes(String)
    /// A hardlink (named by its member path) to anything but a regular file extracted earlier.
    case hardlinkRefused(String)
    /// A character or block device, FIFO or socket member.
    case specialFile(String)
    /// The data written (or a member's declared size) would exceed `limit` bytes, each member of an
    /// archive counting at least ``ExtractionLimits/bytesPerMember`` (its inode and first block).
    case tooLarge(limit: Int64)
    /// The archive has more members (headers of any kind) than ``ExtractionLimits/maxMembers``.
    case tooManyMembers(limit: Int)
    /// The archive is malformed, truncated, fails its checksums or is not in the declared format
    /// (libarchive's message).
    case corrupt(String)
    /// The file system failed (reading the download, writing or syncing staging).
    case io(SystemError)

    public var description: String {
        switch self {
        case .unsafePath(let path): "unsafe path in archive: \(path)"
        case .linkEscapes(let path): "symlink escapes the install directory: \(path)"
        case .hardlinkRefused(let path): "hardlink refused: \(path)"
        case .specialFile(let path): "special file refused: \(path)"
        case .tooLarge(let limit): "archive expands beyond its declared size of \(limit) bytes (counting at least one block per member)"
        case .tooManyMembers(let limit): "archive has more than \(limit) members"
        case .corrupt(let message): "corrupt archive: \(message)"
        case .io(let error): "extraction failed: \(error)"
        }
    }
}

/// What an extraction may write. Bytes alone do not bound an archive: 200,000 empty files carry
/// none, yet each costs an inode and a directory entry. So the number of members is capped, and
/// every member of an archive (file, directory, symlink, hardlink) is charged at least
/// `bytesPerMember` against `maxBytes`. A ``ArchiveFormat/file`` download is one file and is
/// charged its bytes only.
public struct ExtractionLimits: Sendable, Hashable {
    /// The most bytes the extraction may use, as charged (the asset's declared `installed_size`).
    public var maxBytes: Int64
    /// The most members (headers of any kind, `./` included) an archive may have.
    public var maxMembers: Int
    /// The least each member is charged against `maxBytes`: one filesystem block.
    public var bytesPerMember: Int64

    public static let defaultMaxMembers = 10_000
    public static let defaultBytesPerMember: Int64 = 4096

    public init(maxBytes: Int64, maxMembers: Int = defaultMaxMembers, bytesPerMember: Int64 = defaultBytesPerMember) {
        self.maxBytes = maxBytes
        self.maxMembers = maxMembers
        self.bytesPerMember = bytesPerMember
    }

    /// What a member with `bytes` of data is charged.
    public func charge(_ bytes: Int64) -> Int64 { max(bytes, bytesPerMember) }
}

/// What an extraction produced.
public struct ExtractionResult: Sendable, Equatable {
    /// Regular files in staging afterwards (each name of a hardlinked file counts).
    public var files: Int
    /// File data bytes written.
    public var bytes: Int64
    /// What the extraction was charged against ``ExtractionLimits/maxBytes``: the data bytes, with
    /// every archive member counted as at least ``ExtractionLimits/bytesPerMember``. The least
    /// `installed_size` a catalog can declare for this download.
    public var chargedBytes: Int64

    /// `chargedBytes` defaults to `bytes` (a single-file download).
    public init(files: Int, bytes: Int64, chargedBytes: Int64? = nil) {
        self.files = files
        self.bytes = bytes
        self.chargedBytes = chargedBytes ?? bytes
    }
}
