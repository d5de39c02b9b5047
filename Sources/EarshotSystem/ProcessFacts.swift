import Foundation

/// Facts about the running process read from `/proc/self`.
public enum ProcessFacts {
    /// Resident set size in bytes, from `/proc/self/statm` (0 where unavailable).
    public static func residentBytes() -> Int {
        // /proc files report size 0, so read to the end rather than by size.
        guard let handle = FileHandle(forReadingAtPath: "/proc/self/statm") else { return 0 }
        defer { try? handle.close() }
        guard let data = try? handle.readToEnd() else { return 0 }
        let fields = String(decoding: data, as: UTF8.self).split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// The directory of the running executable.
    public static var executableDirectory: String {
        let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return (me as NSString).deletingLastPathComponent
    }
}
