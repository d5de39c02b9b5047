import EarshotSystem
import Foundation
import Testing
import TestSupport

/// Issue 8, defect 12 — the user daemon could be impersonated through a pre-created fallback
/// directory: the per-user socket directories must be the user's own, real and private.
@Suite struct UserDaemonImpersonationDirectoryTests {
    /// An environment whose user socket falls back to `<dir>/earshot-UID` (no XDG_RUNTIME_DIR).
    static func fallbackEnvironment(_ dir: TempDirectory) -> [String: String] { ["TMPDIR": dir.path] }
    static func fallback(_ dir: TempDirectory) -> String { dir.file("earshot-\(getuid())") }

    @Test func fallbackSocketLivesUnderTMPDIR() throws {
        let dir = try TempDirectory("esl")
        defer { dir.remove() }
        #expect(SocketLocations.user(environment: Self.fallbackEnvironment(dir)) == Self.fallback(dir) + "/earshot/earshot.sock")
        #expect(SocketLocations.user(environment: [:]) == "/tmp/earshot-\(getuid())/earshot/earshot.sock")
        #expect(SocketLocations.user(environment: ["XDG_RUNTIME_DIR": "/run/user/7", "TMPDIR": dir.path]) == "/run/user/7/earshot/earshot.sock")
    }

    @Test func missingDirectoriesAreCreatedPrivateAndAbsentOnesAreNotAnError() throws {
        let dir = try TempDirectory("esl")
        defer { dir.remove() }
        let env = Self.fallbackEnvironment(dir)
        #expect(try SocketLocations.checkUserSocketDirectory(environment: env) == false)
        try SocketLocations.prepareUserSocketDirectory(environment: env)
        for path in [Self.fallback(dir), Self.fallback(dir) + "/earshot"] {
            var st = stat()
            #expect(lstat(path, &st) == 0)
            #expect(st.st_mode & S_IFMT == S_IFDIR && st.st_mode & 0o7777 == 0o700 && st.st_uid == geteuid(), "\(path)")
        }
        #expect(try SocketLocations.checkUserSocketDirectory(environment: env))
        try SocketLocations.prepareUserSocketDirectory(environment: env) // an existing good one is fine
    }

    @Test func fallbackDirectoryOwnedByAnotherUserIsRefused() throws {
        let dir = try TempDirectory("esl")
        defer { dir.remove() }
        let env = Self.fallbackEnvironment(dir)
        #expect(mkdir(Self.fallback(dir), 0o700) == 0)
        #expect(chown(Self.fallback(dir), 65534, 65534) == 0)
        #expect(throws: SecureDirectoryError.wrongOwner(path: Self.fallback(dir), owner: 65534, expected: geteuid())) {
            try SocketLocations.prepareUserSocketDirectory(environment: env)
        }
        #expect(throws: SecureDirectoryError.wrongOwner(path: Self.fallback(dir), owner: 65534, expected: geteuid())) {
            try SocketLocations.checkUserSocketDirectory(environment: env)
        }
        #expect(!FileManager.default.fileExists(atPath: Self.fallback(dir) + "/earshot"))
    }

    @Test func fallbackDirectoryThatIsASymlinkIsRefused() throws {
        let dir = try TempDirectory("esl")
        defer { dir.remove() }
        let env = Self.fallbackEnvironment(dir)
        #expect(mkdir(dir.file("elsewhere"), 0o700) == 0)
        #expect(symlink(dir.file("elsewhere"), Self.fallback(dir)) == 0)
        #expect(throws: SecureDirectoryError.symbolicLink(path: Self.fallback(dir))) {
            try SocketLocations.prepareUserSocketDirectory(environment: env)
        }
        #expect(throws: SecureDirectoryError.symbolicLink(path: Self.fallback(dir))) {
            try SocketLocations.checkUserSocketDirectory(environment: env)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.file("elsewhere")).isEmpty)
    }

    @Test func fallbackDirectoryOthersMayWriteIsRefused() throws {
        let dir = try TempDirectory("esl")
        defer { dir.remove() }
        let env = Self.fallbackEnvironment(dir)
        #expect(mkdir(Self.fallback(dir), 0o700) == 0)
        #expect(chmod(Self.fallback(dir), 0o777) == 0)
        #expect(throws: SecureDirectoryError.tooOpen(path: Self.fallback(dir), mode: 0o777)) {
            try SocketLocations.prepareUserSocketDirectory(environment: env)
        }
        #expect(throws: SecureDirectoryError.tooOpen(path: Self.fallback(dir), mode: 0o777)) {
            try SocketLocations.checkUserSocketDirectory(environment: env)
        }
    }

    @Test func hostileSocketSubdirectoryIsRefused() throws {
        let dir = try TempDirectory("esl")
        defer { dir.remove() }
        let env = Self.fallbackEnvironment(dir)
        #expect(mkdir(Self.fallback(dir), 0o700) == 0)
        #expect(mkdir(Self.fallback(dir) + "/earshot", 0o700) == 0)
        #expect(chown(Self.fallback(dir) + "/earshot", 65534, 65534) == 0)
        #expect(throws: SecureDirectoryError.wrongOwner(path: Self.fallback(dir) + "/earshot", owner: 65534, expected: geteuid())) {
            try SocketLocations.prepareUserSocketDirectory(environment: env)
        }
    }

    @Test func runtimeDirectoryOthersMayWriteIsRefused() throws {
        let dir = try TempDirectory("esl")
        defer { dir.remove() }
        #expect(mkdir(dir.file("run"), 0o700) == 0)
        #expect(chmod(dir.file("run"), 0o1777) == 0)
        #expect(throws: SecureDirectoryError.tooOpen(path: dir.file("run"), mode: 0o1777)) {
            try SocketLocations.prepareUserSocketDirectory(environment: ["XDG_RUNTIME_DIR": dir.file("run")])
        }
        // systemd-logind's usual 0700 runtime directory is fine; we create `earshot` in it.
        #expect(chmod(dir.file("run"), 0o700) == 0)
        try SocketLocations.prepareUserSocketDirectory(environment: ["XDG_RUNTIME_DIR": dir.file("run")])
        #expect(try SocketLocations.checkUserSocketDirectory(environment: ["XDG_RUNTIME_DIR": dir.file("run")]))
    }
}
