import Foundation
import Testing
import TestSupport

@Suite struct TempDirectoryTests {
    /// Regression: the daemon tests' shared fixture (`CoreFixture`, its installed models) was never
    /// removed, leaving 76–115 MB in /tmp after every run of the suite. The test runs itself in a
    /// child process, which makes such a directory and exits; the directory must be gone after.
    @Test func aSharedFixturesDirectoryIsGoneWhenTheTestProcessExits() async throws {
        if let probe = ProcessInfo.processInfo.environment["EARSHOT_TEMPDIR_PROBE"] {
            let fixture = try TempDirectory("esfixture")
            fixture.removeAtExit()
            try fixture.write("models/model.onnx", "weights")
            try fixture.path.write(toFile: probe, atomically: true, encoding: .utf8)
            #expect(FileManager.default.fileExists(atPath: fixture.file("models/model.onnx")))
            return
        }
        let directory = try TempDirectory("esprobe")
        defer { directory.remove() }
        let probe = directory.file("probe")
        let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let child = try await ChildProcess.run(executable, ["--testing-library", "swift-testing", "--filter", "aSharedFixturesDirectoryIsGoneWhenTheTestProcessExits"],
                                               environment: ["EARSHOT_TEMPDIR_PROBE": probe], in: directory)
        #expect(child.status == 0, "\(child.stdout)\(child.stderr)")
        let left = try String(contentsOfFile: probe, encoding: .utf8)
        #expect(left.hasPrefix("/tmp/esfixture-"))
        #expect(!FileManager.default.fileExists(atPath: left))
    }
}
