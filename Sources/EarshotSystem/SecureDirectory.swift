#if canImport(Glibc)
import Glibc
#endif

/// Why a directory that must belong to this user alone was refused.
public enum SecureDirectoryError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The path is a symbolic link (its target could be anyone's).
    case symbolicLink(path: String)
    /// The path exists and is not a directory.
    case notADirectory(path: String)
    /// The directory belongs to another uid.
    case wrongOwner(path: String, owner: UInt32, expected: UInt32)
    /// Group or others have access they must not have (`mode`: the permission bits).
    case tooOpen(path: String, mode: UInt32)
    /// A system call failed.
    case system(SystemError)

    /// The directory refused, when the error is about one.
    public var path: String? {
        switch self {
        case .symbolicLink(let path), .notADirectory(let path), .wrongOwner(let path, _, _), .tooOpen(let path, _): path
        case .system: nil
        }
    }

    public var description: String {
        let refusal = "refusing to use it: another local user may have put it there to impersonate the Earshot daemon"
        return switch self {
        case .symbolicLink(let path): "\(path) is a symbolic link; \(refusal)"
        case .notADirectory(let path): "\(path) is not a directory"
        case .wrongOwner(let path, let owner, let expected): "\(path) is owned by uid \(owner), not by this user (uid \(expected)); \(refusal)"
        case .tooOpen(let path, let mode): "\(path) has mode 0\(String(mode, radix: 8)), open to other users; \(refusal) (it must be 0700)"
        case .system(let error): "\(error)"
        }
    }
}

/// Directories that must be this user's own: a real directory (not a symlink), owned by the
/// effective uid, without group/other permissions. Checked with `lstat`, so a symlink is seen as
/// such. Once such a directory is verified nobody else can add, rename or replace anything in it,
/// so what is created inside needs no further race-prone checks.
public enum SecureDirectory {
    /// Checks `path`; false when it does not exist. `forbidden`: permission bits group and others
    /// must not have (0o077: none at all; 0o022: no write).
    public static func check(_ path: String, forbidden: mode_t = 0o077) throws(SecureDirectoryError) -> Bool {
        var st = stat()
        if lstat(path, &st) != 0 {
            let code = errno
            if code == ENOENT { return false }
            throw .system(SystemError("lstat(\(path))", errno: code))
        }
        let type = st.st_mode & S_IFMT
        if type == S_IFLNK { throw .symbolicLink(path: path) }
        guard type == S_IFDIR else { throw .notADirectory(path: path) }
        let owner = geteuid()
        guard st.st_uid == owner else { throw .wrongOwner(path: path, owner: st.st_uid, expected: owner) }
        guard st.st_mode & forbidden == 0 else { throw .tooOpen(path: path, mode: UInt32(st.st_mode & 0o7777)) }
        return true
    }

    /// Creates `path` with mode 0700 unless something is there, then checks what is there. The
    /// parent must exist.
    public static func ensure(_ path: String, forbidden: mode_t = 0o077) throws(SecureDirectoryError) {
        if mkdir(path, 0o700) != 0 {
            let code = errno
            guard code == EEXIST else { throw .system(SystemError("mkdir(\(path))", errno: code)) }
        }
        guard try check(path, forbidden: forbidden) else { throw .system(SystemError("mkdir(\(path))", errno: ENOENT)) }
    }
}
