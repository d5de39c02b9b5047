import EarshotAssets
import EarshotSystem
import Foundation
import Testing
import TestSupport

/// Archives built at test time with the real tools, and the checks shared by the extraction tests.
enum ExtractFixture {
    /// Runs `tool` (looked up on PATH) and fails the test if it does not succeed.
    static func run(_ tool: String, _ arguments: [String], in directory: TempDirectory) async throws {
        let result = try await ChildProcess.run("/usr/bin/env", [tool] + arguments, in: directory)
        #expect(result.status == 0, "\(tool) \(arguments.joined(separator: " ")): \(result.stderr)")
    }

    /// Runs a shell command line inside `directory` (for tools that archive relative paths).
    static func shell(_ command: String, in directory: TempDirectory) async throws {
        let result = try await ChildProcess.run("/bin/sh", ["-c", "cd '\(directory.path)' && " + command], in: directory)
        #expect(result.status == 0, "\(command): \(result.stderr)")
    }

    /// Builds a hostile or hand-crafted archive with Python's tarfile/zipfile (see `script`).
    static func python(_ recipe: String, _ output: String, _ extra: [String] = [], in directory: TempDirectory) async throws {
        let result = try await ChildProcess.run("/usr/bin/python3", ["-c", script, recipe, output] + extra, in: directory)
        #expect(result.status == 0, "python recipe \(recipe): \(result.stderr)")
    }

    /// Recipes: each writes one archive to argv[2]; argv[3] is an extra argument where noted.
    static let script = #"""
    import io, sys, tarfile, zipfile, struct

    recipe, out = sys.argv[1], sys.argv[2]
    extra = sys.argv[3] if len(sys.argv) > 3 else None

    def member(name, data=b"x", kind=tarfile.REGTYPE, link="", mode=0o644):
        info = tarfile.TarInfo(name)
        info.type = kind
        info.linkname = link
        info.mode = mode
        if kind == tarfile.REGTYPE:
            info.size = len(data)
            return info, io.BytesIO(data)
        return info, None

    def tar(members, fmt=tarfile.PAX_FORMAT):
        with tarfile.open(out, "w:gz", format=fmt) as archive:
            for info, data in members:
                archive.addfile(info, data)

    def dev(name, kind):
        info = tarfile.TarInfo(name)
        info.type = kind
        info.devmajor, info.devminor = 1, 3
        return info, None

    def zip_entries(entries):
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, data, attr in entries:
                info = zipfile.ZipInfo(name)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = attr << 16
                archive.writestr(info, data)

    R, D, L, H = tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE
    if recipe == "dotdot":
        tar([member("ok.txt"), member("../evil")])
    elif recipe == "nested-dotdot":
        tar([member("a/b.txt"), member("a/../../evil")])
    elif recipe == "absolute":
        tar([member("ok.txt"), member(extra)])
    elif recipe == "symlink-absolute":
        tar([member("etc", kind=L, link="/etc"), member("etc/evil")])
    elif recipe == "symlink-relative":
        tar([member("sub", kind=D, mode=0o755), member("sub/link", kind=L, link="../../outside")])
    elif recipe == "symlink-chain":
        tar([member("s", kind=L, link="."), member("l", kind=L, link="s/..")])
    elif recipe == "through-symlink":
        tar([member("d", kind=D, mode=0o755), member("l", kind=L, link="d"), member("l/file.txt")])
    elif recipe == "hardlink-absolute":
        tar([member("pw", kind=H, link="/etc/passwd")])
    elif recipe == "hardlink-dotdot":
        tar([member("pw", kind=H, link="../outside.txt")])
    elif recipe == "hardlink-forward":
        tar([member("b", kind=H, link="a"), member("a", b"later")])
    elif recipe == "hardlink-directory":
        tar([member("d", kind=D, mode=0o755), member("b", kind=H, link="d")])
    elif recipe == "hardlink-inside":
        tar([member("a.txt", b"shared content\n"), member("b.txt", kind=H, link="a.txt")])
    elif recipe == "chardev":
        tar([member("ok.txt"), dev("null", tarfile.CHRTYPE)])
    elif recipe == "blockdev":
        tar([dev("disk", tarfile.BLKTYPE)])
    elif recipe == "fifo":
        tar([dev("pipe", tarfile.FIFOTYPE)])
    elif recipe == "modes":
        tar([member("setuid", b"#!/bin/sh\n", mode=0o4755), member("private", b"p", mode=0o600),
             member("open", b"o", mode=0o777), member("dir", kind=D, mode=0o700)])
    elif recipe == "unicode":
        tar([member("données/modèle.txt", "é\n".encode())])
    elif recipe == "empty-files":
        # An inode bomb: argv[3] empty regular files (no data bytes at all).
        tar([member("f%06d" % index, b"") for index in range(int(extra))])
    elif recipe == "declared-huge":
        # A header claiming 5 MiB followed by only 512 bytes of data.
        info = tarfile.TarInfo("huge.bin")
        info.size = 5 << 20
        with open(out, "wb") as f:
            f.write(info.tobuf(tarfile.GNU_FORMAT) + b"\0" * 512)
    elif recipe == "zip-dotdot":
        zip_entries([("ok.txt", b"ok", 0o100644), ("../evil", b"evil", 0o100644)])
    elif recipe == "zip-absolute":
        zip_entries([(extra, b"evil", 0o100644)])
    elif recipe == "zip-symlink":
        zip_entries([("link", b"/etc", 0o120777)])
    elif recipe == "zip-lying-size":
        # 4 MiB of zeros whose local and central headers both claim 10 bytes.
        data = b"\0" * (4 << 20)
        zip_entries([("bomb.bin", data, 0o100644)])
        blob = bytearray(open(out, "rb").read())
        local = blob.index(b"PK\x03\x04")
        struct.pack_into("<I", blob, local + 22, 10)
        central = blob.index(b"PK\x01\x02")
        struct.pack_into("<I", blob, central + 24, 10)
        open(out, "wb").write(bytes(blob))
    else:
        sys.exit("unknown recipe " + recipe)
    """#

    /// A directory of source files exercising nesting, empty and multi-block files, an executable,
    /// non-ASCII names and internal file and directory symlinks.
    static func makeSourceTree(at root: String) throws {
        let fm = FileManager.default
        try fm.createDirectory(atPath: root + "/models/v1", withIntermediateDirectories: true)
        try fm.createDirectory(atPath: root + "/bin", withIntermediateDirectories: true)
        try fm.createDirectory(atPath: root + "/données", withIntermediateDirectories: true)
        try fm.createDirectory(atPath: root + "/empty-dir", withIntermediateDirectories: true)
        var generator = SystemRandomNumberGenerator()
        let big = Data((0..<(3 << 20) + 17).map { _ in UInt8.random(in: 0...255, using: &generator) })
        try big.write(to: URL(fileURLWithPath: root + "/models/v1/model.bin"))
        try Data("hello model\n".utf8).write(to: URL(fileURLWithPath: root + "/README.txt"))
        try Data().write(to: URL(fileURLWithPath: root + "/models/empty.txt"))
        try Data("é\n".utf8).write(to: URL(fileURLWithPath: root + "/données/modèle.txt"))
        try Data("#!/bin/sh\necho hi\n".utf8).write(to: URL(fileURLWithPath: root + "/bin/run.sh"))
        chmod(root + "/bin/run.sh", 0o755)
        try fm.createSymbolicLink(atPath: root + "/model", withDestinationPath: "models/v1/model.bin")
        try fm.createSymbolicLink(atPath: root + "/models/current", withDestinationPath: "v1")
    }

    /// Relative path → description (type, content digest or link target, executable bit) of a tree.
    static func snapshot(_ root: String) throws -> [String: String] {
        var result: [String: String] = [:]
        let fm = FileManager.default
        for case let relative as String in fm.enumerator(atPath: root)! {
            let path = root + "/" + relative
            var info = stat()
            #expect(lstat(path, &info) == 0)
            switch info.st_mode & S_IFMT {
            case S_IFDIR: result[relative] = "dir"
            case S_IFLNK: result[relative] = "link -> " + (try fm.destinationOfSymbolicLink(atPath: path))
            case S_IFREG:
                let digest = try FileDigest.sha256(path: path)
                result[relative] = "file \(digest) exec=\(info.st_mode & 0o100 != 0)"
            default: result[relative] = "other"
            }
        }
        return result
    }

    /// Entries directly in `path` (empty if it does not exist).
    static func children(_ path: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
    }

    /// A staging dir inside its own parent, so tests can prove nothing was created next to it.
    static func staging(in directory: TempDirectory) throws -> (parent: String, staging: String) {
        let parent = directory.file("outside")
        try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
        return (parent, parent + "/staging")
    }

    /// Expects extraction to fail with `expected` and leave nothing in or next to staging.
    static func expectRefused(
        _ archive: String, _ format: ArchiveFormat, _ expected: ExtractionError,
        maxBytes: Int64 = 1 << 30, in directory: TempDirectory,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let (parent, staging) = try staging(in: directory)
        #expect(throws: expected, sourceLocation: sourceLocation) {
            try ArchiveExtractor.extract(archive: archive, format: format, into: staging, maxBytes: maxBytes)
        }
        #expect(children(parent).isEmpty, "left behind: \(children(parent))", sourceLocation: sourceLocation)
        #expect(!FileManager.default.fileExists(atPath: directory.file("evil")), sourceLocation: sourceLocation)
    }

    /// Expects extraction to fail as ``ExtractionError/corrupt(_:)`` and leave nothing behind.
    static func expectCorrupt(
        _ archive: String, _ format: ArchiveFormat, maxBytes: Int64 = 1 << 30, in directory: TempDirectory,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let (parent, staging) = try staging(in: directory)
        let error = #expect(throws: ExtractionError.self, sourceLocation: sourceLocation) {
            try ArchiveExtractor.extract(archive: archive, format: format, into: staging, maxBytes: maxBytes)
        }
        if case .corrupt(let message)? = error {
            #expect(!message.isEmpty, sourceLocation: sourceLocation)
        } else {
            Issue.record("expected corrupt, got \(String(describing: error))", sourceLocation: sourceLocation)
        }
        #expect(children(parent).isEmpty, "left behind: \(children(parent))", sourceLocation: sourceLocation)
    }
}

@Suite("Extraction of well-formed archives")
struct ExtractTests {
    /// Packs a source tree with the real tool for `format`, extracts it and compares the trees.
    func roundTrip(_ format: ArchiveFormat, pack: (TempDirectory) async throws -> String) async throws {
        let directory = try TempDirectory("ex")
        defer { directory.remove() }
        try ExtractFixture.makeSourceTree(at: directory.file("src"))
        let archive = try await pack(directory)
        let (_, staging) = try ExtractFixture.staging(in: directory)

        var reports: [Int64] = []
        let result = try ArchiveExtractor.extract(archive: archive, format: format, into: staging, maxBytes: 16 << 20) {
            reports.append($0)
        }

        let expected = try ExtractFixture.snapshot(directory.file("src"))
        #expect(try ExtractFixture.snapshot(staging) == expected)
        #expect(result.files == 5)
        let expectedBytes: Int64 = (3 << 20) + 17 + 12 + 3 + 18
        #expect(result.bytes == expectedBytes)
        #expect(reports == reports.sorted() && reports.last == result.bytes)
        // Internal symlinks work after extraction.
        #expect(try FileDigest.sha256(path: staging + "/model") == FileDigest.sha256(path: staging + "/models/v1/model.bin"))
        #expect(FileManager.default.fileExists(atPath: staging + "/models/current/model.bin"))
    }

    @Test func tarGzMatchesSource() async throws {
        try await roundTrip(.tarGz) { directory in
            try await ExtractFixture.run("tar", ["-C", directory.file("src"), "-czf", directory.file("a.tar.gz"), "."], in: directory)
            return directory.file("a.tar.gz")
        }
    }

    @Test func tarBz2MatchesSource() async throws {
        try await roundTrip(.tarBz2) { directory in
            try await ExtractFixture.run("tar", ["-C", directory.file("src"), "-cjf", directory.file("a.tar.bz2"), "."], in: directory)
            return directory.file("a.tar.bz2")
        }
    }

    @Test func tarZstMatchesSource() async throws {
        try await roundTrip(.tarZst) { directory in
            // Packed without a leading `./` this time.
            try await ExtractFixture.shell("cd src && tar -cf - * | zstd -q -o ../a.tar.zst", in: directory)
            return directory.file("a.tar.zst")
        }
    }

    @Test func zipMatchesSource() async throws {
        try await roundTrip(.zip) { directory in
            try await ExtractFixture.shell("cd src && zip -q -r -y ../a.zip .", in: directory)
            return directory.file("a.zip")
        }
    }

    @Test func singleFileIsCopied() async throws {
        let directory = try TempDirectory("ex")
        defer { directory.remove() }
        let source = directory.file("model.onnx")
        try Data((0..<(2 << 20) + 5).map { UInt8(truncatingIfNeeded: $0 &* 31) }).write(to: URL(fileURLWithPath: source))
        let (_, staging) = try ExtractFixture.staging(in: directory)
        let result = try ArchiveExtractor.extract(archive: source, format: .file, into: staging, maxBytes: 4 << 20, singleFileName: "vad.onnx")
        #expect(result == ExtractionResult(files: 1, bytes: (2 << 20) + 5))
        #expect(ExtractFixture.children(staging) == ["vad.onnx"])
        #expect(try FileDigest.sha256(path: staging + "/vad.onnx") == FileDigest.sha256(path: source))
    }

    @Test func extractsIntoAnExistingEmptyStagingDirectory() async throws {
        let directory = try TempDirectory("ex")
        defer { directory.remove() }
        try directory.write("src/a.txt", "a\n")
        try await ExtractFixture.run("tar", ["-C", directory.file("src"), "-czf", directory.file("a.tar.gz"), "a.txt"], in: directory)
        let staging = directory.file("staging")
        try FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: false)
        let result = try ArchiveExtractor.extract(archive: directory.file("a.tar.gz"), format: .tarGz, into: staging, maxBytes: 4096)
        #expect(result == ExtractionResult(files: 1, bytes: 2, chargedBytes: 4096), "one member: one block")
        #expect(try String(contentsOfFile: staging + "/a.txt", encoding: .utf8) == "a\n")
    }

    @Test func hardlinkToAnEarlierFileIsKept() async throws {
        let directory = try TempDirectory("ex")
        defer { directory.remove() }
        let archive = directory.file("h.tar.gz")
        try await ExtractFixture.python("hardlink-inside", archive, in: directory)
        let (_, staging) = try ExtractFixture.staging(in: directory)
        let result = try ArchiveExtractor.extract(archive: archive, format: .tarGz, into: staging, maxBytes: 1 << 20)
        #expect(result.files == 2)
        var a = stat(), b = stat()
        #expect(lstat(staging + "/a.txt", &a) == 0 && lstat(staging + "/b.txt", &b) == 0)
        #expect(a.st_ino == b.st_ino && a.st_nlink == 2)
        #expect(try String(contentsOfFile: staging + "/b.txt", encoding: .utf8) == "shared content\n")
    }

    @Test func modesAreSanitized() async throws {
        let directory = try TempDirectory("ex")
        defer { directory.remove() }
        let archive = directory.file("m.tar.gz")
        try await ExtractFixture.python("modes", archive, in: directory)
        let (_, staging) = try ExtractFixture.staging(in: directory)
        _ = try ArchiveExtractor.extract(archive: archive, format: .tarGz, into: staging, maxBytes: 1 << 20)
        func mode(_ name: String) -> mode_t {
            var info = stat()
            _ = lstat(staging + "/" + name, &info)
            return info.st_mode & 0o7777
        }
        #expect(mode("setuid") == 0o755)
        #expect(mode("private") == 0o644)
        #expect(mode("open") == 0o755)
        #expect(mode("dir") == 0o755)
    }

    @Test func paxUnicodeNamesSurvive() async throws {
        let directory = try TempDirectory("ex")
        defer { directory.remove() }
        let archive = directory.file("u.tar.gz")
        try await ExtractFixture.python("unicode", archive, in: directory)
        let (_, staging) = try ExtractFixture.staging(in: directory)
        _ = try ArchiveExtractor.extract(archive: archive, format: .tarGz, into: staging, maxBytes: 1 << 20)
        #expect(try String(contentsOfFile: staging + "/données/modèle.txt", encoding: .utf8) == "é\n")
    }
}
