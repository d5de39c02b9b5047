@testable import EarshotSpeech
import EarshotEngineLink
import EarshotWire
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

    /// Regression: sherpa-onnx's detector copies the speech segment so far into a new vector on
    /// every step. Under earshotd's 128 KiB mmap threshold the engine mapped each copy afresh and
    /// faulted it in page by page, so a step cost more the longer the speech went on (a 6 s
    /// utterance's steps 52 ms instead of 21–31). With the engine's own threshold the copies reuse
    /// heap memory: 20 s of continuous speech in 0.1 s steps faults in ~1000–1300 pages, not the
    /// ~35 000 of a mapping per step.
    @Test(.enabled(if: SherpaFixture.vadAvailable, SherpaFixture.vadMissing))
    func detectorStepsInLongSpeechMapNoCopyOfTheSegment() throws {
        let engine = EngineProcess(executable: EngineProcess.defaultExecutable())
        let detector = try SileroDetector(configuration: Self.configuration, engine: engine)
        let pid = try #require(engine.processID)
        let speech = try SherpaFixture.concatenation(longerThan: 20, silence: 0).samples
        try detector.accept(Array(speech.prefix(16000))) // the detector's first allocations
        let before = try Self.minorFaults(of: pid)
        try detector.accept(Array(speech.dropFirst(16000)))
        let faults = try Self.minorFaults(of: pid) - before
        print("[engine] minor page faults over \(speech.count / 16000 - 1) s of detector steps: \(faults)")
        #expect(faults < 4000, "the engine faulted in \(faults) pages: segment copies are mapped afresh")
    }

    /// The bound behind that threshold: a detector buffering more than
    /// `EngineVADLoad.maxBufferSeconds` would copy segments over it, so the engine refuses it.
    @Test(.enabled(if: SherpaFixture.vadAvailable, SherpaFixture.vadMissing))
    func theEngineRefusesADetectorBufferOverItsLimit() throws {
        let engine = EngineProcess(executable: EngineProcess.defaultExecutable())
        func load(buffer: Double) throws(SherpaOnnxError) {
            _ = try engine.load { name throws(SherpaOnnxError) in
                try EngineObject.frame(EngineVADLoad(
                    id: "", object: name, model: SileroDetector.Configuration.defaultModelPath, threshold: 0.5,
                    minSilenceDuration: 0.5, minSpeechDuration: 0.25, maxSpeechDuration: 20, windowSize: 512,
                    sampleRate: 16000, bufferSeconds: buffer))
            }
        }
        try load(buffer: EngineVADLoad.maxBufferSeconds)
        #expect {
            try load(buffer: EngineVADLoad.maxBufferSeconds + 1)
        } throws: { error in
            if case .loadFailed = error as? SherpaOnnxError { true } else { false }
        }
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

    /// A process's minor page faults so far (/proc/PID/stat, the 10th field).
    static func minorFaults(of pid: pid_t) throws -> Int {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        let fields = stat[stat.index(after: try #require(stat.lastIndex(of: ")")))...].split(separator: " ")
        return try #require(Int(fields[7]))
    }

    static func inode(of fd: Int32) throws -> UInt {
        var info = stat()
        #expect(fstat(fd, &info) == 0)
        return UInt(info.st_ino)
    }
}
