import EarshotAssets
import EarshotSystem
import Foundation
import Testing
import TestSupport

/// Hostile and broken archives: each is refused with the precise error and leaves nothing behind,
/// neither in staging nor next to it.
@Suite("Extraction of hostile archives")
struct ExtractHostileTests {
    /// Builds the Python `recipe` as a tar.gz and expects `expected`.
    func refuse(_ recipe: String, _ expected: ExtractionError, extra: [String] = [], format: ArchiveFormat = .tarGz) async throws {
        let directory = try TempDirectory("ex")
        defer { directory.remove() }
        let archive = directory.file("hostile.archive")
        try await ExtractFixture.python(recipe, archive, extra, in: directory)
        try ExtractFixture.expectRefused(archive, format, expected, in: directory)
    }

    @Test func dotDotEntry() async throws {
        try await refuse("dotdot", .unsafePath("../evil"))
    }

    @Test func dotDotInsideAPath() async throws {
        try await refuse("nested-dotdot", .unsafePath("a/../../evil"))
    }

    @Test func absolutePath() async throws {
        let target = "/tmp/es-absolute-\(getpid())-\(UInt32.random(in: 0...UInt32.max))/evil"
        try await refuse("absolute", .unsafePath(target), extra: [target])
        #expect(!FileManager.default.fileExists(atPath: target))
    }

    @Test func symlinkToAnAbsolutePath() async throws {
        try await refuse("symlink-absolute", .linkEscapes("etc"))
    }

    @Test func symlinkClimbingOutOfStaging() async throws {
        try await refuse("symlink-relative", .linkEscapes("sub/link"))
    }

    /// `s -> .` and `l -> s/..` each look harmless lexically; together `l` names staging's parent.
    @Test func symlinkChainEscapingThroughAnotherLink() async throws {
        try await refuse("symlink-chain", .linkEscapes("l"))
    }

    @Test func memberBelowASymlink() async throws {
        try await refuse("through-symlink", .unsafePath("l/file.txt"))
    }

    @Test func hardlinkToEtcPasswd() async throws {
        try await refuse("hardlink-absolute", .hardlinkRefused("pw"))
    }

    @Test func hardlinkOutOfStaging() async throws {
        try await refuse("hardlink-dotdot", .hardlinkRefused("pw"))
    }

    @Test func hardlinkToAFileNotYetExtracted() async throws {
        try await refuse("hardlink-forward", .hardlinkRefused("b"))
    }

    @Test func hardlinkToADirectory() async throws {
        try await refuse("hardlink-directory", .hardlinkRefused("b"))
    }

    @Test func characterDevice() async throws {
        try await refuse("chardev", .specialFile("null"))
    }

    @Test func blockDevice() async throws {
        try await refuse("blockdev", .specialFile("disk"))
    }

    @Test func fifo() async throws {
        try await refuse("fifo", .specialFile("pipe"))
    }

    @Test func zipDotDotEntry() async throws {
        try await refuse("zip-dotdot", .unsafePath("../evil"), format: .zip)
    }

    @Test func zipAbsolutePath() async throws {
        let target = "/tmp/es-absolute-\(getpid())-\(UInt32.random(in: 0...UInt32.max))/evil"
        try await refuse("zip-absolute", .unsafePath(target), extra: [target], format: .zip)
        #expect(!FileManager.default.fileExists(atPath: target))
    }

    @Test func zipSymlinkToEtc() async throws {
        try await refuse("zip-symlink", .linkEscapes("link"), format: .zip)
    }

    /// Headers claiming 10 bytes do not help: the 4 MiB really inflated are counted.
    @Test func zipWithLyingSizesIsStoppedByRealByteCount() async throws {
        let directory = try TempDirectory("ex")
        defer { directory.remove() }
        let archive = directory.file("bomb.zip")
        try await ExtractFixture.python("zip-lying-size", archive, in: directory)
        try ExtractFixture.expectRefused(archive, .zip, .tooLarge(limit: 1 << 20), maxBytes: 1 << 20, in: directory)
    }

    /// The same archive within the limit still fails: libarchive sees the size mismatch.
    @Test func zipWithLyingSizesWithinTheLimitIsCorrupt() async throws {
        let directory = try TempDirectory("ex")
        defer { directory.remove() }
        let archive = directory.file("bomb.zip")
        try await ExtractFixture.python("zip-lying-size", archive, in: directory)
        try ExtractFixture.expectCorrupt(archive, .zip, maxBytes: 8 << 20, in: directory)
    }

    @Test func memberDeclaringMoreThanTheLimit() async throws {
        let directory = try TempDirectory("ex")
        defer { directory.remove() }
        let archive = directory.file("huge.tar")
        try await ExtractFixture.python("declared-huge", archive, in: directory)
        try await ExtractFixture.run("gzip", ["-k", archive], in: directory)
        try ExtractFixture.expectRefused(archive + ".gz", .tarGz, .tooLarge(limit: 1 << 20), maxBytes: 1 << 20, in: directory)
    }

    @Test func headerSizeLargerThanTheDataIsCorrupt() async throws {
        let directory = try TempDirectory("ex")
        defer { directory.remove() }
        let archive = directory.file("huge.tar")
        try await ExtractFixture.python("declared-huge", archive, in: directory)
        try await ExtractFixture.run("gzip", ["-k", archive], in: directory)
        try ExtractFixture.expectCorrupt(archive + ".gz", .tarGz, maxBytes: 8 << 20, in: directory)
    }

    /// Many honest members whose total passes the limit: refused partway, and what was written is gone.
    @Test func totalBeyondTheLimit() async throws {
        let directory = try TempDirectory("ex")
        defer { directory.remove() }
        for index in 0..<8 {
            let data = Data(repeating: UInt8(index), count: 256 << 10)
            try FileManager.default.createDirectory(atPath: directory.file("src"), withIntermediateDirectories: true)
            try data.write(to: URL(fileURLWithPath: directory.file("src/part\(index).bin")))
        }
        try await ExtractFixture.run("tar", ["-C", directory.file("src"), "--zstd", "-cf", directory.file("parts.tar.zst"), "."], in: directory)
        try ExtractFixture.expectRefused(directory.file("parts.tar.zst"), .tarZst, .tooLarge(limit: 1 << 20), maxBytes: 1 << 20, in: directory)
    }

    /// Issue 8, defect 11: 20,000 empty files carry no data bytes, so a byte budget alone let them
    /// all through. The member cap refuses them whatever the byte budget, and with the cap raised
    /// the one-block charge per member does; either way nothing is left behind.
    @Test func inodeBombsAreRefused() async throws {
        let directory = try TempDirectory("ex")
        defer { directory.remove() }
        let archive = directory.file("inodes.tar.gz")
        try await ExtractFixture.python("empty-files", archive, ["20000"], in: directory)
        try ExtractFixture.expectRefused(archive, .tarGz, .tooManyMembers(limit: ExtractionLimits.defaultMaxMembers), maxBytes: 1 << 40, in: directory)

        let (parent, staging) = try ExtractFixture.staging(in: directory)
        #expect(throws: ExtractionError.tooLarge(limit: 16 << 20)) {
            try ArchiveExtractor.extract(archive: archive, format: .tarGz, into: staging, limits: ExtractionLimits(maxBytes: 16 << 20, maxMembers: 100_000))
        }
        #expect(ExtractFixture.children(parent).isEmpty, "left behind: \(ExtractFixture.children(parent).count) entries")

        // Below both limits, empty files extract and are charged one block each.
        let small = directory.file("few.tar.gz")
        try await ExtractFixture.python("empty-files", small, ["50"], in: directory)
        let result = try ArchiveExtractor.extract(archive: small, format: .tarGz, into: staging, limits: ExtractionLimits(maxBytes: 50 * 4096))
        #expect(result == ExtractionResult(files: 50, bytes: 0, chargedBytes: 50 * 4096))
        #expect(ExtractFixture.children(staging).count == 50)
    }

    /// The member cap counts headers of every kind and is configurable.
    @Test func memberCapIsConfigurable() async throws {
        let directory = try TempDirectory("ex")
        defer { directory.remove() }
        let archive = directory.file("few.tar.gz")
        try await ExtractFixture.python("empty-files", archive, ["50"], in: directory)
        let (parent, staging) = try ExtractFixture.staging(in: directory)
        #expect(throws: ExtractionError.tooManyMembers(limit: 49)) {
            try ArchiveExtractor.extract(archive: archive, format: .tarGz, into: staging, limits: ExtractionLimits(maxBytes: 1 << 30, maxMembers: 49))
        }
        #expect(ExtractFixture.children(parent).isEmpty)
        let result = try ArchiveExtractor.extract(archive: archive, format: .tarGz, into: staging, limits: ExtractionLimits(maxBytes: 1 << 30, maxMembers: 50, bytesPerMember: 512))
        #expect(result.chargedBytes == 50 * 512)
    }

    @Test func truncatedTarGz() async throws {
        let directory = try TempDirectory("ex")
        defer { directory.remove() }
        try await ExtractFixture.shell("mkdir src && head -c 3000000 /dev/urandom > src/blob && tar -C src -czf full.tar.gz blob && head -c 1500000 full.tar.gz > cut.tar.gz", in: directory)
        try ExtractFixture.expectCorrupt(directory.file("cut.tar.gz"), .tarGz, in: directory)
    }

    @Test func truncatedTarBz2() async throws {
        let directory = try TempDirectory("ex")
        defer { directory.remove() }
        try await ExtractFixture.shell("mkdir src && head -c 3000000 /dev/urandom > src/blob && tar -C src -cjf full.tar.bz2 blob && head -c 1500000 full.tar.bz2 > cut.tar.bz2", in: directory)
        try ExtractFixture.expectCorrupt(directory.file("cut.tar.bz2"), .tarBz2, in: directory)
    }

    @Test func truncatedZip() async throws {
        let directory = try TempDirectory("ex")
        defer { directory.remove() }
        try await ExtractFixture.shell("mkdir src && head -c 3000000 /dev/urandom > src/blob && (cd src && zip -q ../full.zip blob) && head -c 1500000 full.zip > cut.zip", in: directory)
        try ExtractFixture.expectCorrupt(directory.file("cut.zip"), .zip, in: directory)
    }

    @Test func formatOtherThanDeclared() async throws {
        let directory = try TempDirectory("ex")
        defer { directory.remove() }
        try directory.write("src/a.txt", "a\n")
        try await ExtractFixture.run("tar", ["-C", directory.file("src"), "-czf", directory.file("a.tar.gz"), "a.txt"], in: directory)
        try await ExtractFixture.run("tar", ["-C", directory.file("src"), "-cf", directory.file("a.tar"), "a.txt"], in: directory)
        try ExtractFixture.expectCorrupt(directory.file("a.tar.gz"), .tarZst, in: directory)
        try ExtractFixture.expectCorrupt(directory.file("a.tar.gz"), .zip, in: directory)
        try ExtractFixture.expectCorrupt(directory.file("a.tar"), .tarGz, in: directory)
        try ExtractFixture.expectCorrupt(directory.file("src/a.txt"), .tarGz, in: directory)
    }

    @Test func singleFileNameMustBePlain() async throws {
        let directory = try TempDirectory("ex")
        defer { directory.remove() }
        let source = try directory.write("model.bin", "weights")
        for name in ["../evil", "a/b", "", ".", "..", "/etc/evil"] {
            let (parent, staging) = try ExtractFixture.staging(in: directory)
            #expect(throws: ExtractionError.unsafePath(name)) {
                try ArchiveExtractor.extract(archive: source, format: .file, into: staging, maxBytes: 100, singleFileName: name)
            }
            #expect(ExtractFixture.children(parent).isEmpty)
        }
        #expect(throws: ExtractionError.unsafePath("")) {
            try ArchiveExtractor.extract(archive: source, format: .file, into: directory.file("outside/staging"), maxBytes: 100)
        }
        #expect(!FileManager.default.fileExists(atPath: directory.file("evil")))
    }

    @Test func singleFileBeyondTheLimit() async throws {
        let directory = try TempDirectory("ex")
        defer { directory.remove() }
        let source = directory.file("model.bin")
        try Data(count: 3 << 20).write(to: URL(fileURLWithPath: source))
        let (parent, staging) = try ExtractFixture.staging(in: directory)
        #expect(throws: ExtractionError.tooLarge(limit: 2 << 20)) {
            try ArchiveExtractor.extract(archive: source, format: .file, into: staging, maxBytes: 2 << 20, singleFileName: "m.bin")
        }
        #expect(ExtractFixture.children(parent).isEmpty)
    }

    @Test func missingArchiveIsAnIOError() async throws {
        let directory = try TempDirectory("ex")
        defer { directory.remove() }
        let (parent, staging) = try ExtractFixture.staging(in: directory)
        for format in [ArchiveFormat.tarGz, .zip] {
            let error = #expect(throws: ExtractionError.self) {
                try ArchiveExtractor.extract(archive: directory.file("missing"), format: format, into: staging, maxBytes: 100)
            }
            guard case .io(let system)? = error else {
                Issue.record("expected io, got \(String(describing: error))")
                continue
            }
            #expect(system.errno == ENOENT)
        }
        #expect(ExtractFixture.children(parent).isEmpty)
    }

    /// A pre-existing staging dir that is not empty is refused untouched: cleanup could not tell
    /// its contents from ours.
    @Test func nonEmptyStagingIsRefusedUntouched() async throws {
        let directory = try TempDirectory("ex")
        defer { directory.remove() }
        let source = try directory.write("model.bin", "weights")
        try directory.write("staging/keep.txt", "mine")
        let error = #expect(throws: ExtractionError.self) {
            try ArchiveExtractor.extract(archive: source, format: .file, into: directory.file("staging"), maxBytes: 100, singleFileName: "m")
        }
        guard case .io(let system)? = error else {
            Issue.record("expected io, got \(String(describing: error))")
            return
        }
        #expect(system.errno == ENOTEMPTY)
        #expect(ExtractFixture.children(directory.file("staging")) == ["keep.txt"])
    }

    /// A failure in a pre-existing (empty) staging dir empties it but leaves the dir for the caller.
    @Test func failureEmptiesAnExistingStagingDirectory() async throws {
        let directory = try TempDirectory("ex")
        defer { directory.remove() }
        let archive = directory.file("hostile.tar.gz")
        try await ExtractFixture.python("chardev", archive, in: directory)
        let staging = directory.file("staging")
        try FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: false)
        #expect(throws: ExtractionError.specialFile("null")) {
            try ArchiveExtractor.extract(archive: archive, format: .tarGz, into: staging, maxBytes: 1 << 20)
        }
        #expect(FileManager.default.fileExists(atPath: staging))
        #expect(ExtractFixture.children(staging).isEmpty)
    }
}
