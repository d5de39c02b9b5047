import Foundation

/// The real `minisign` binary (Debian package `minisign`), for signing test catalogs. Key pairs are
/// generated per test, unencrypted, inside a temp dir; none is ever committed.
public struct MinisignTool: Sendable {
    /// A generated key pair.
    public struct KeyPair: Sendable {
        public let publicKeyPath: String
        public let secretKeyPath: String
        /// The `.pub` file's text (untrusted comment line + base64 key line).
        public let publicKeyText: String
    }

    /// A failed `minisign` run, with its output.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    public let executable: String

    /// Finds `minisign` on `$PATH` (or `/usr/bin`).
    public init() throws {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let candidates = path.split(separator: ":").map { "\($0)/minisign" } + ["/usr/bin/minisign"]
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw Failure(description: "minisign is not installed (Debian package minisign; Scripts/setup.sh installs it)")
        }
        executable = found
    }

    /// `minisign -G -W`: a new password-less key pair `<name>.pub` / `<name>.key` in `directory`.
    public func generateKey(named name: String, in directory: TempDirectory) async throws -> KeyPair {
        let publicKeyPath = directory.file("\(name).pub")
        let secretKeyPath = directory.file("\(name).key")
        try await run(["-G", "-W", "-p", publicKeyPath, "-s", secretKeyPath], in: directory)
        let text = try String(contentsOfFile: publicKeyPath, encoding: .utf8)
        return KeyPair(publicKeyPath: publicKeyPath, secretKeyPath: secretKeyPath, publicKeyText: text)
    }

    /// `minisign -S`: signs `file` (prehashed by default, `-l` legacy when `legacy`), writes
    /// `<file>.minisig` and returns its text.
    @discardableResult
    public func sign(_ file: String, with key: KeyPair, legacy: Bool = false, trustedComment: String? = nil, in directory: TempDirectory) async throws -> String {
        var arguments = ["-S", "-s", key.secretKeyPath, "-m", file, "-x", file + ".minisig"]
        if legacy { arguments.append("-l") }
        if let trustedComment { arguments += ["-t", trustedComment] }
        try await run(arguments, in: directory)
        return try String(contentsOfFile: file + ".minisig", encoding: .utf8)
    }

    /// `minisign -V`: whether minisign itself accepts `signatureFile` for `file`.
    public func verifies(_ file: String, signatureFile: String, publicKeyPath: String, in directory: TempDirectory) async throws -> Bool {
        let result = try await ChildProcess.run(executable, ["-V", "-q", "-p", publicKeyPath, "-m", file, "-x", signatureFile], in: directory)
        return result.status == 0
    }

    private func run(_ arguments: [String], in directory: TempDirectory) async throws {
        let result = try await ChildProcess.run(executable, arguments, in: directory)
        guard result.status == 0 else {
            throw Failure(description: "minisign \(arguments.joined(separator: " ")) exited \(result.status): \(result.stderr)\(result.stdout)")
        }
    }
}
