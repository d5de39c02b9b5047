import EarshotWire
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Frames over a connected stream socket with blocking calls, for a link between two trusted
/// processes (earshotd and a helper it spawned): ``read()`` on one thread, ``write(_:)`` from any.
public final class BlockingFrameLink: @unchecked Sendable {
    // @unchecked: `decoder` is used by the one reading thread; writes hold `writeLock`.
    public let fd: Int32
    private var decoder: FrameDecoder
    private let writeLock = NSLock()
    private var buffer = [UInt8](repeating: 0, count: 1 << 16)

    public init(fd: Int32, limits: FrameLimits) {
        self.fd = fd
        decoder = FrameDecoder(limits: limits)
    }

    /// The next frame; nil at the end of the stream. Blocking.
    public func read() throws -> Frame? {
        while true {
            if let frame = try decoder.next() { return frame }
            let count = try buffer.withUnsafeMutableBytes { bytes in
                try systemCall("recv") { recv(fd, bytes.baseAddress, bytes.count, 0) }
            }
            if count == 0 {
                try decoder.finish()
                return nil
            }
            decoder.feed(buffer[0..<count])
        }
    }

    /// Sends `frame` whole; frames written from several threads never interleave. Blocking.
    public func write(_ frame: Frame) throws {
        let bytes = try frame.encoded()
        try writeLock.withLock {
            var sent = 0
            while sent < bytes.count {
                sent += try bytes.withUnsafeBytes { all in
                    try systemCall("send") { send(fd, all.baseAddress! + sent, all.count - sent, Int32(MSG_NOSIGNAL)) }
                }
            }
        }
    }
}
