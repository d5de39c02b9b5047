import EarshotSystem
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A real tmpfs mounted by the test (root only), for full-disk tests.
public final class SmallTmpfs: Sendable {
    public let path: String

    /// Mounts a tmpfs of `size` (`mount -o size=`) at `path`; nil, with a note, where mounting is
    /// not permitted — except under `CI=true`, where that is a failure, not a skip.
    public init?(at path: String, size: String) throws {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        guard mount("tmpfs", path, "tmpfs", 0, "size=\(size),mode=0755") == 0 else {
            let code = errno
            if (code == EPERM || code == EACCES) && !EmbeddedModels.isCI {
                print("skipping: mounting a tmpfs is not permitted here (\(String(cString: strerror(code))))")
                return nil
            }
            throw SystemError("mount(tmpfs, \(path))", errno: code)
        }
        self.path = path
    }

    /// Writes a file until the filesystem is full; returns its path.
    public func fill() throws -> String {
        let filler = path + "/filler"
        let fd = try systemCall("open(\(filler))") { open(filler, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644) }
        defer { close(fd) }
        let chunk = [UInt8](repeating: 0xA5, count: 4096)
        while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
        return filler
    }

    public func unmount() {
        if umount2(path, 0) != 0 { _ = umount2(path, Int32(MNT_DETACH)) }
    }
}
