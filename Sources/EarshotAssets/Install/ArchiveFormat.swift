/// How a catalog asset's download is packed; the raw values are the catalog's spelling.
public enum ArchiveFormat: String, Codable, Sendable, CaseIterable {
    /// A gzip-compressed tar archive.
    case tarGz = "tar.gz"
    /// A bzip2-compressed tar archive.
    case tarBz2 = "tar.bz2"
    /// A zstd-compressed tar archive.
    case tarZst = "tar.zst"
    /// A zip archive (stored or deflated entries).
    case zip
    /// Not an archive: the download is the asset's single file.
    case file
}
