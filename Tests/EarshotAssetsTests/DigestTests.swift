import EarshotAssets
import EarshotSystem
import Foundation
import Testing
import TestSupport

@Suite("SHA-256 of files")
struct DigestTests {
    /// The digest `sha256sum` prints for `path`.
    func coreutils(_ path: String, in directory: TempDirectory) async throws -> String {
        let result = try await ChildProcess.run("/usr/bin/sha256sum", [path], in: directory)
        #expect(result.status == 0, "\(result.stderr)")
        return String(result.stdout.prefix(64))
    }

    func check(bytes: [UInt8]) async throws {
        let directory = try TempDirectory("dg")
        defer { directory.remove() }
        let path = directory.file("input.bin")
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        var reports: [Int64] = []
        let digest = try FileDigest.sha256(path: path) { reports.append($0) }
        #expect(digest == (try await coreutils(path, in: directory)))
        #expect(digest.count == 64 && digest == digest.lowercased())
        #expect(reports == reports.sorted())
        #expect((reports.last ?? 0) == Int64(bytes.count))
    }

    @Test func emptyFile() async throws {
        try await check(bytes: [])
        let directory = try TempDirectory("dg")
        defer { directory.remove() }
        let path = try directory.write("empty", "")
        #expect(try FileDigest.sha256(path: path) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test func smallFile() async throws {
        try await check(bytes: Array("abc".utf8))
        try await check(bytes: Array("hello earshot\n".utf8))
    }

    /// Several read buffers plus a ragged tail.
    @Test func multiBufferFile() async throws {
        var generator = SystemRandomNumberGenerator()
        try await check(bytes: (0..<(9 << 20) + 4093).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    @Test func missingFileNamesOpen() throws {
        #expect(throws: SystemError("open", errno: ENOENT)) {
            try FileDigest.sha256(path: "/nonexistent/earshot-digest")
        }
    }

    @Test func directoryFailsToRead() throws {
        #expect(throws: SystemError("read", errno: EISDIR)) {
            try FileDigest.sha256(path: "/tmp")
        }
    }
}
