import Foundation

/// Resident memory of another process (the daemon under test), from `/proc/PID`: now, at its peak
/// since the last ``resetPeak()``, so a test can bound what one request made the process allocate
/// even when that memory was freed again.
public struct ProcessMemory: Sendable {
    public let pid: Int32

    public init(pid: Int32) { self.pid = pid }

    /// `VmRSS` in bytes (0 once the process is gone).
    public var resident: Int { field("VmRSS") }

    /// `VmHWM` in bytes: the most resident memory since start or the last ``resetPeak()``.
    public var peak: Int { field("VmHWM") }

    /// `VmHWM` of the process and of its running children added up (earshotd and its engine
    /// process, which holds the models): an upper bound of the tree's peak.
    public var treePeak: Int {
        ProcessMemory.children(of: pid).reduce(peak) { $0 + ProcessMemory(pid: $1).treePeak }
    }

    /// The running children of process `pid` (from `/proc/PID/task/*/children`).
    public static func children(of pid: Int32) -> [Int32] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.flatMap { task in
            ((try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/children", encoding: .utf8)) ?? "")
                .split(separator: " ").compactMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        }
    }

    /// Resets the peak to the current resident size (writes 5 to `/proc/PID/clear_refs`).
    public func resetPeak() throws {
        try "5".write(toFile: "/proc/\(pid)/clear_refs", atomically: false, encoding: .utf8)
    }

    private func field(_ name: String) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix(name + ":") {
            let parts = line.split(separator: " ", omittingEmptySubsequences: true)
            if parts.count >= 2, let kilobytes = Int(parts[1]) { return kilobytes * 1024 }
        }
        return 0
    }
}
