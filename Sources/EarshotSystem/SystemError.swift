#if canImport(Glibc)
import Glibc
#endif

/// A failed C call: which function and its `errno`.
public struct SystemError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The C function that failed.
    public var function: String
    /// The `errno` it left.
    public var errno: Int32
    public init(_ function: String, errno: Int32) {
        self.function = function
        self.errno = errno
    }
    public var description: String { "\(function): \(String(cString: strerror(errno)))" }
}

/// Runs a C call that returns -1 on failure, retrying on `EINTR`; throws ``SystemError`` naming it.
/// Every syscall in Earshot goes through this one helper.
@discardableResult
public func systemCall<T: FixedWidthInteger>(_ function: String, _ body: () -> T) throws(SystemError) -> T {
    while true {
        let result = body()
        if result != -1 { return result }
        let code = Glibc.errno
        if code == EINTR { continue }
        throw SystemError(function, errno: code)
    }
}
