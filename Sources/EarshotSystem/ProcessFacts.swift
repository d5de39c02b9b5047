import CMalloc
import Dispatch
import Foundation

/// Facts about the running process read from `/proc/self`.
public enum ProcessFacts {
    /// Resident set size in bytes, from `/proc/self/statm` (0 where unavailable).
    public static func residentBytes() -> Int {
        guard let text = read("/proc/self/statm") else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// The resident set of this process (or of process `pid`) split by what backs it, from
    /// `/proc/…/status` (zeros where unavailable).
    public static func residentMemory(pid: Int32? = nil) -> ResidentMemory {
        var memory = ResidentMemory(anonymousBytes: 0, fileBytes: 0, sharedMemoryBytes: 0)
        for line in (read("/proc/\(pid.map(String.init) ?? "self")/status") ?? "").split(separator: "\n") {
            let parts = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard parts.count >= 2, let kibibytes = Int(parts[1]) else { continue }
            switch parts[0] {
            case "RssAnon:": memory.anonymousBytes = kibibytes << 10
            case "RssFile:": memory.fileBytes = kibibytes << 10
            case "RssShmem:": memory.sharedMemoryBytes = kibibytes << 10
            default: break
            }
        }
        return memory
    }

    /// The directory of the running executable.
    public static var executableDirectory: String {
        let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return (me as NSString).deletingLastPathComponent
    }

    private static func read(_ path: String) -> String? {
        // /proc files report size 0, so read to the end rather than by size.
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        return (try? handle.readToEnd()).map { String(decoding: $0, as: UTF8.self) }
    }
}
