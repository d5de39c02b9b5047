import CCrypto
import EarshotSystem
#if canImport(Glibc)
import Glibc
#endif

/// Streaming file digests with OpenSSL's EVP interface (SHA-NI/AVX code paths where the CPU has them).
///
/// Synchronous and blocking: async callers run it inside `BlockingWork.run`.
public enum FileDigest {
    /// Read size: large enough that syscall overhead vanishes, small enough to stay in L2/L3.
    static let bufferSize = 2 << 20

    /// The SHA-256 of the file at `path` as 64 lowercase hex digits.
    ///
    /// `progress` receives the running number of bytes hashed after every read. OpenSSL failures
    /// (which only happen when memory runs out) are reported as `ENOMEM`/`EIO` against the EVP call.
    public static func sha256(path: String, progress: ((Int64) -> Void)? = nil) throws(SystemError) -> String {
        let fd = try systemCall("open") { open(path, O_RDONLY | O_CLOEXEC) }
        defer { close(fd) }
        // Advisory only: a failure changes nothing but read-ahead.
        _ = posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL)

        guard let context = EVP_MD_CTX_new() else { throw SystemError("EVP_MD_CTX_new", errno: ENOMEM) }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1 else {
            throw SystemError("EVP_DigestInit_ex", errno: EIO)
        }

        let buffer = UnsafeMutableRawPointer.allocate(byteCount: bufferSize, alignment: 4096)
        defer { buffer.deallocate() }
        var total: Int64 = 0
        while true {
            let count = try systemCall("read") { read(fd, buffer, bufferSize) }
            if count == 0 { break }
            guard EVP_DigestUpdate(context, buffer, count) == 1 else {
                throw SystemError("EVP_DigestUpdate", errno: EIO)
            }
            total += Int64(count)
            progress?(total)
        }

        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard EVP_DigestFinal_ex(context, &digest, &length) == 1 else {
            throw SystemError("EVP_DigestFinal_ex", errno: EIO)
        }
        return hex(digest.prefix(Int(length)))
    }

    /// The SHA-256 of `bytes` as 64 lowercase hex digits (OpenSSL's one-shot `EVP_Digest`).
    public static func sha256(bytes: [UInt8]) throws(SystemError) -> String {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard EVP_Digest(bytes, bytes.count, &digest, &length, EVP_sha256(), nil) == 1 else { throw SystemError("EVP_Digest", errno: EIO) }
        return hex(digest.prefix(Int(length)))
    }

    /// Lowercase hexadecimal spelling of `bytes`.
    static func hex(_ bytes: some Collection<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
