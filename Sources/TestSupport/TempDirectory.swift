import Foundation

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
}
