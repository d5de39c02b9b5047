import Foundation
import Synchronization

/// Directories that live as long as the test process, removed when it exits.
private let removedAtExit = Mutex<[String]>([])
/// The process that registered the hook (read when it is registered: a global is set on first use).
private let owner = getpid()
private let exitHook: Void = {
    _ = owner
    atexit {
        guard getpid() == owner else { return }  // a forked child leaves its parent's directories
        for path in removedAtExit.withLock({ $0 }) { try? FileManager.default.removeItem(atPath: path) }
    }
}()

/// A fresh directory under /tmp (short, so socket paths inside fit `sockaddr_un`), removed on `remove()`.
public struct TempDirectory: Sendable {
    public let path: String

    public init(_ prefix: String = "es") throws {
        var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw CocoaError(.fileWriteUnknown) }
        path = String(cString: made)
    }

    /// `name` inside the directory.
    public func file(_ name: String) -> String { path + "/" + name }

    /// Writes `text` to `name` inside the directory and returns its path.
    @discardableResult
    public func write(_ name: String, _ text: String) throws -> String {
        let target = file(name)
        try FileManager.default.createDirectory(atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try text.write(toFile: target, atomically: true, encoding: .utf8)
        return target
    }

    public func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Removes the directory when the process exits too: for a fixture shared by a whole test
    /// run, which no test can remove, or one a failing test may leave before its `remove()`.
    public func removeAtExit() {
        _ = exitHook
        removedAtExit.withLock { $0.append(path) }
    }
}
