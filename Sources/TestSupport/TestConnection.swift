import EarshotSystem
import EarshotWire
import Foundation

/// A raw protocol client for tests: send frames or arbitrary bytes, read frames with a timeout.
public final class TestConnection: Sendable {
    public let channel: FrameChannel

    public init(_ path: String) throws {
        channel = FrameChannel(fd: try UnixSocket.connect(path: path), label: "earshot.test")
        channel.start()
    }

    /// A client on `fd`, an end of a socket pair whose other end a server in this process serves.
    public init(fd: Int32) throws {
        try UnixSocket.prepareInherited(fd)
        channel = FrameChannel(fd: fd, label: "earshot.test")
        channel.start()
    }

    /// Sends a typed event.
    public func send<E: WireEvent>(_ event: E, payload: [UInt8] = []) async throws {
        try await channel.send(Frame(event, payload: payload))
    }

    /// Writes raw bytes, bypassing the encoder (for malformed input).
    public func sendRaw(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = try systemCall("send") { bytes[offset...].withUnsafeBytes { Glibc.send(channel.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }
            offset += n
        }
    }

    /// The next frame, `nil` at end of stream; throws on timeout, on malformed input, and
    /// `CancellationError` when the waiting task is cancelled.
    public func next(timeout: Duration = .seconds(10)) async throws -> Frame? {
        let frames = channel.frames
        return try await withThrowingTaskGroup(of: Frame?.self) { group in
            group.addTask {
                // Iterators of one stream share its buffer; the tests read from one task at a time.
                var iterator = frames.makeAsyncIterator()
                return try await iterator.next()
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                throw CocoaError(.userCancelled, userInfo: [NSLocalizedDescriptionKey: "no frame within \(timeout)"])
            }
            let first = try await group.next()!
            group.cancelAll()
            // A stream's iterator also ends when the waiting task is cancelled: that is no close.
            if first == nil { try Task.checkCancellation() }
            return first
        }
    }

    /// Sends `event` and returns the next frame.
    public func roundTrip<E: WireEvent>(_ event: E) async throws -> Frame? {
        try await send(event)
        return try await next()
    }

    public func close() { channel.close() }

    /// `earshot.stats` of the daemon at `socket`, on a connection of its own (benchmarks).
    public static func stats(of socket: String) async throws -> StatsReply {
        let connection = try TestConnection(socket)
        defer { connection.close() }
        var frame = try Frame(StatsRequest())
        frame.data["id"] = .string("stats")
        try await connection.channel.send(frame)
        while let reply = try await connection.next(timeout: .seconds(30)) {
            if reply.requestID == "stats" { return try reply.decode(StatsReply.self) }
        }
        throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "the daemon at \(socket) closed the connection before its stats"])
    }
}

