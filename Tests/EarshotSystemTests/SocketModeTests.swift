import EarshotSystem
import Foundation
import Testing
import TestSupport

/// Issue 8, defect 10 — the mode is set on the socket we bound, never through a symlink.
@Suite struct SocketModeFailsOpenUnitTests {
    @Test func settingTheSocketModeDoesNotFollowASymlink() throws {
        let dir = try TempDirectory("esm")
        defer { dir.remove() }
        let target = try dir.write("secret", "x")
        #expect(chmod(target, 0o600) == 0)
        #expect(symlink(target, dir.file("earshot.sock")) == 0)
        #expect(throws: SystemError.self) { try UnixSocket.setMode(ofSocketAt: dir.file("earshot.sock"), to: 0o666) }
        // Nor a regular file (a hard link planted in place of the socket).
        #expect(throws: SystemError.self) { try UnixSocket.setMode(ofSocketAt: target, to: 0o666) }
        var st = stat()
        #expect(stat(target, &st) == 0 && st.st_mode & 0o7777 == 0o600)
    }

    @Test func listenCreatesTheSocketWithTheRequestedMode() throws {
        let dir = try TempDirectory("esm")
        defer { dir.remove() }
        for mode: mode_t in [0o600, 0o660, 0o666] {
            let path = dir.file("s\(mode).sock")
            let fd = try UnixSocket.listen(path: path, mode: mode)
            defer { close(fd) }
            var st = stat()
            #expect(lstat(path, &st) == 0 && st.st_mode & S_IFMT == S_IFSOCK && st.st_mode & 0o7777 == mode)
        }
    }
}
