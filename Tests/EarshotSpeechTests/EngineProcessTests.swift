import EarshotSpeech
import Foundation
import Testing
import TestSupport

/// The sherpa-onnx engines run in `earshot-engine`, a process of their own that earshotd starts
/// with the first engine object and ends with the last (issue 10: ONNX Runtime's ~8 MiB it never
/// frees left earshotd at 13.5 MiB of anonymous memory after an unload, over the 12 MiB goal).
/// Each test has a private process so nothing else shares it.
@Suite struct EngineProcessTests {
    static let configuration = SileroDetector.Configuration.transcription

    @Test(.enabled(if: SherpaFixture.vadAvailable, SherpaFixture.vadMissing))
    func engineObjectsShareOneProcessThatEndsWithTheLastOne() throws {
        let engine = EngineProcess(executable: EngineProcess.defaultExecutable())
        #expect(engine.processID == nil, "nothing runs before an engine loads")
        var first: SileroDetector? = try SileroDetector(configuration: Self.configuration, engine: engine)
        let pid = try #require(engine.processID)
        var second: SileroDetector? = try SileroDetector(configuration: Self.configuration, engine: engine)
        #expect(engine.processID == pid)
        first = nil
        #expect(engine.processID == pid, "one object is still loaded")
        try second?.accept([Float](repeating: 0, count: 1600))
        second = nil
        #expect(engine.processID == nil, "the last object took the process with it")
        _ = (first, second)
        let next = try SileroDetector(configuration: Self.configuration, engine: engine)
        #expect(engine.processID != nil && engine.processID != pid)
        #expect(next.isUsable)
    }

    /// Regression: earshotd's sockets are not all close-on-exec, and an engine process holding a
    /// client's connection would keep that client from ever seeing the daemon close it.
    @Test(.enabled(if: SherpaFixture.vadAvailable, SherpaFixture.vadMissing))
    func theEngineProcessHoldsNoDescriptorButItsLinkAndOutput() throws {
        let inheritable = Pipe() // pipe(2) without O_CLOEXEC
        defer { try? inheritable.fileHandleForReading.close(); try? inheritable.fileHandleForWriting.close() }
        let engine = EngineProcess(executable: EngineProcess.defaultExecutable())
        let detector = try SileroDetector(configuration: Self.configuration, engine: engine)
        let pid = try #require(engine.processID)
        // The detector answered, so the engine had closed what it inherited before it read.
        let open = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").compactMap(Int32.init).filter { fd in
            // ONNX Runtime and glibc may open files of their own (the model, /dev/urandom, an eventfd).
            let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)")) ?? ""
            return target.hasPrefix("pipe:") || target.hasPrefix("socket:")
        }
        let ownPipe = "pipe:[\(try Self.inode(of: inheritable.fileHandleForReading.fileDescriptor))]"
        let targets = open.map { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)")) ?? "" }
        #expect(!targets.contains(ownPipe), "the engine inherited the test's pipe: \(targets)")
        #expect(open.contains(0), "its link is standard input")
        _ = detector
    }

    @Test(.enabled(if: SherpaFixture.vadAvailable, SherpaFixture.vadMissing))
    func aCrashedEngineFailsItsObjectsWithATypedErrorAndTheNextLoadStartsAnother() throws {
        let engine = EngineProcess(executable: EngineProcess.defaultExecutable())
        let detector = try SileroDetector(configuration: Self.configuration, engine: engine)
        let pid = try #require(engine.processID)
        #expect(kill(pid, SIGKILL) == 0)
        #expect {
            // The call made as it dies, or the next: the link's end reaches every caller.
            for _ in 0..<1000 { try detector.accept([Float](repeating: 0, count: 1600)) }
        } throws: { error in
            guard case SherpaOnnxError.engineUnavailable(let why) = error else { return false }
            return why.contains("signal 9")
        }
        #expect(!detector.isUsable)
        let replacement = try SileroDetector(configuration: Self.configuration, engine: engine)
        try replacement.accept([Float](repeating: 0, count: 16000))
        #expect(engine.processID != pid)
    }

    @Test(.enabled(if: SherpaFixture.vadAvailable, SherpaFixture.vadMissing))
    func aMissingEngineExecutableIsATypedError() {
        let engine = EngineProcess(executable: "/nonexistent/earshot-engine")
        #expect {
            _ = try SileroDetector(configuration: Self.configuration, engine: engine)
        } throws: { error in
            guard case SherpaOnnxError.engineUnavailable(let why) = error else { return false }
            return why.contains("/nonexistent/earshot-engine")
        }
    }

    @Test func theEngineIsFoundBesideTheExecutableUnlessTheEnvironmentNamesOne() {
        #expect(EngineProcess.defaultExecutable(environment: ["EARSHOT_ENGINE": "/opt/e"]) == "/opt/e")
        let found = EngineProcess.defaultExecutable(environment: [:])
        #expect(found.hasSuffix("/earshot-engine"))
        #expect(FileManager.default.isExecutableFile(atPath: found), "swift build builds it beside the test bundle: \(found)")
    }

    static func inode(of fd: Int32) throws -> UInt {
        var info = stat()
        #expect(fstat(fd, &info) == 0)
        return UInt(info.st_ino)
    }
}
