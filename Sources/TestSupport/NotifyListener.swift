import EarshotSystem
import Foundation

/// A stand-in for systemd's `$NOTIFY_SOCKET`: a datagram socket collecting sd_notify messages.
public final class NotifyListener: @unchecked Sendable {
    public let path: String
    private let fd: Int32
    private let lock = NSLock()
    private var received: [String] = []

    public init(in directory: TempDirectory) throws {
        path = directory.file("notify.sock")
        fd = try systemCall("socket") { socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            let bytes = Array(path.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        try systemCall("bind") {
            withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        }
    }

    deinit { close(fd) }

    /// Every message received so far (each a `KEY=VALUE\n…` datagram).
    public func messages() -> [String] {
        lock.lock()
        defer { lock.unlock() }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { break }
            received.append(String(decoding: buffer[0..<n], as: UTF8.self))
        }
        return received
    }

    /// Waits until `count` messages contain `needle`; returns all messages then (nil after
    /// `timeout`: a bound on waiting, not a measurement).
    public func wait(for needle: String, count: Int = 1, timeout: Duration = .seconds(10)) async -> [String]? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let all = messages()
            if all.filter({ $0.contains(needle) }).count >= count { return all }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }
}
