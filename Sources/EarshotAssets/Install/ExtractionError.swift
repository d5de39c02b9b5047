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
    /// The data written (or a member's declared size) would exceed `limit` bytes.
    case tooLarge(limit: Int64)
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
        case .tooLarge(let limit): "archive expands beyond its declared size of \(limit) bytes"
        case .corrupt(let message): "corrupt archive: \(message)"
        case .io(let error): "extraction failed: \(error)"
        }
    }
}

/// What an extraction produced.
public struct ExtractionResult: Sendable, Equatable {
    /// Regular files in staging afterwards (each name of a hardlinked file counts).
    public var files: Int
    /// File data bytes written.
    public var bytes: Int64

    public init(files: Int, bytes: Int64) {
        self.files = files
        self.bytes = bytes
    }
}
