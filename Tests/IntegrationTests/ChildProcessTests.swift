import Foundation
import Testing
import TestSupport

/// The test harness's child processes, which every CLI and daemon test starts.
@Suite struct ChildProcessTests {
    /// Regression (a hung CI run's /proc/PID/fd): the test process kept both output files of every
    /// child open for good, two descriptors per child, hundreds over a suite run.
    @Test func aChildLeavesNoDescriptorOfItsOutputFilesOpen() async throws {
        let directory = try TempDirectory("eschild")
        defer { directory.remove() }
        let run = try await ChildProcess.run("/bin/sh", ["-c", "echo out; echo err >&2"], in: directory)
        #expect(run.status == 0 && run.stdout == "out\n" && run.stderr == "err\n", "\(run)")
        let open = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").compactMap {
            try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)")
        }
        #expect(!open.contains { $0.hasPrefix(directory.path) }, "\(open.filter { $0.hasPrefix(directory.path) })")
    }
}
