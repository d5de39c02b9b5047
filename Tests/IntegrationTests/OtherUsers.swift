import Foundation
import TestSupport

/// Clients running as real other uids (the tests run as root): `setpriv` drops to the uid before
/// running the program, so the daemon sees that uid in `SO_PEERCRED`.
enum OtherUser {
    /// `nobody`.
    static let nobody: UInt32 = 65534
    /// A second non-admin uid with no passwd entry.
    static let stranger: UInt32 = 65533

    static func setprivArguments(_ uid: UInt32, _ executable: String, _ arguments: [String]) -> [String] {
        ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", executable] + arguments
    }

    /// Runs `executable` as `uid` to completion.
    static func run(as uid: UInt32, _ executable: String, _ arguments: [String], environment: [String: String?] = [:], in directory: TempDirectory,
                    timeout: Duration = .seconds(30)) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await ChildProcess.run("/usr/bin/setpriv", setprivArguments(uid, executable, arguments), environment: environment, in: directory, timeout: timeout)
    }

    /// Starts `executable` as `uid`.
    static func start(as uid: UInt32, _ executable: String, _ arguments: [String], in directory: TempDirectory, name: String) throws -> ChildProcess {
        try ChildProcess("/usr/bin/setpriv", setprivArguments(uid, executable, arguments), in: directory, name: name)
    }

    /// Lets other uids reach a socket inside `directories` (test directories are 0700).
    static func openDirectories(_ directories: String...) {
        for directory in directories { chmod(directory, 0o755) }
    }

    /// Waits until `child` printed a line starting with `prefix` (it signals readiness that way).
    static func waitForLine(_ child: ChildProcess, _ prefix: String, timeout: Duration = .seconds(20)) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let line = child.stdout.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) { return String(line) }
            if !child.process.isRunning { throw FixtureError("\(prefix): the child exited \(child.process.terminationStatus): \(child.stderr)") }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw FixtureError("no '\(prefix)' line within \(timeout): \(child.stdout) \(child.stderr)")
    }

    /// argv: socket, count. Opens `count` connections, says hello on each and prints one JSON line
    /// per reply, then `holding` and keeps every connection open, idle, until killed.
    static let holder = #"""
        import json, socket, sys, time
        def frame(kind, data):
            body = json.dumps(data).encode()
            return json.dumps({"type": kind, "version": "1.7.0", "data_length": len(body)}).encode() + b"\n" + body
        def receive(stream):
            line = stream.readline()
            if not line:
                return None, {}
            header = json.loads(line)
            data = dict(header.get("data") or {})
            if header.get("data_length"):
                data.update(json.loads(stream.read(header["data_length"])))
            return header["type"], data
        held = []
        for index in range(int(sys.argv[2])):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(sys.argv[1])
            stream = sock.makefile("rwb")
            stream.write(frame("earshot.hello", {"id": "h", "protocol_version": 1, "app_id": "org.example.holder"}))
            stream.flush()
            kind, data = receive(stream)
            print(json.dumps({"type": kind, "code": data.get("code")}), flush=True)
            held.append((sock, stream))
        print("holding", flush=True)
        time.sleep(3600)
        """#

    /// argv: socket path, connections. A stand-in "daemon": listens at the path, prints
    /// `listening`, then for each connection reads until the client closes and prints
    /// `received N` (the bytes the client sent).
    static let fakeDaemon = #"""
        import os, socket, sys
        path = sys.argv[1]
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        os.chmod(path, 0o666)
        server.listen(8)
        print("listening", flush=True)
        for _ in range(int(sys.argv[2])):
            client, _ = server.accept()
            client.settimeout(20)
            total = 0
            try:
                while True:
                    chunk = client.recv(65536)
                    if not chunk:
                        break
                    total += len(chunk)
            except OSError:
                pass
            print("received %d" % total, flush=True)
            client.close()
        """#
}
