import EarshotSystem
import EarshotWire
import Foundation
import Testing
import TestSupport

/// `FrameChannel` over a real Unix socket pair: framing both ways, malformed input, the peer
/// closing, and a peer that never reads being dropped instead of growing the queue.
@Suite struct FrameChannelTests {
    /// A connected, non-blocking, close-on-exec socket pair.
    static func socketPair() throws -> (Int32, Int32) {
        var fds: [Int32] = [0, 0]
        let made = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds)
        try #require(made == 0, "socketpair: errno \(errno)")
        return (fds[0], fds[1])
    }

    static func next(_ iterator: inout FrameChannel.Frames.AsyncIterator) async throws -> Frame? {
        try await iterator.next()
    }

    @Test func framesWithDataAndPayloadArriveIntactAndInOrder() async throws {
        let (a, b) = try Self.socketPair()
        let left = FrameChannel(fd: a), right = FrameChannel(fd: b)
        left.start()
        right.start()
        defer { left.close(); right.close() }
        let sent = (0..<50).map { index in
            Frame(type: "test.event", data: ["index": .int(Int64(index)), "text": .string(String(repeating: "é", count: index * 10))],
                  payload: (0..<(index * 997)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) })
        }
        for frame in sent { try await left.send(frame) }
        var iterator = right.frames.makeAsyncIterator()
        for frame in sent {
            let got = try #require(try await Self.next(&iterator))
            #expect(got.type == frame.type && got.data == frame.data && got.payload == frame.payload)
        }
    }

    @Test func malformedInputEndsTheFramesWithAFrameError() async throws {
        let (a, b) = try Self.socketPair()
        let channel = FrameChannel(fd: b)
        channel.start()
        defer { channel.close(); close(a) }
        let garbage = Array("{\"type\": 12}\n".utf8)
        #expect(garbage.withUnsafeBytes { write(a, $0.baseAddress, $0.count) } == garbage.count)
        var iterator = channel.frames.makeAsyncIterator()
        await #expect(throws: FrameError.self) { _ = try await Self.next(&iterator) }
    }

    @Test func thePeerClosingEndsTheFrames() async throws {
        let (a, b) = try Self.socketPair()
        let left = FrameChannel(fd: a), right = FrameChannel(fd: b)
        left.start()
        right.start()
        defer { right.close() }
        try await left.send(Frame(type: "last"))
        left.closeAfterFlush()
        var iterator = right.frames.makeAsyncIterator()
        #expect(try await Self.next(&iterator)?.type == "last")
        #expect(try await Self.next(&iterator) == nil)
    }

    @Test func aPeerThatNeverReadsIsDroppedOnceItsQueueIsFull() async throws {
        let (a, b) = try Self.socketPair()
        // Small queue limit; the peer (b) never reads.
        let channel = FrameChannel(fd: a, options: FrameChannel.Options(maxQueuedBytes: 256 << 10))
        channel.start()
        defer { channel.close(); close(b) }
        let big = Frame(type: "bulk", payload: [UInt8](repeating: 7, count: 64 << 10))
        for _ in 0..<64 { channel.post(big) }
        // Posting never waits; the channel gives up on the peer and closes.
        var iterator = channel.frames.makeAsyncIterator()
        let ended = await #expect(throws: (any Error).self) { while try await Self.next(&iterator) != nil {} }
        #expect(ended as? ChannelError == .slowPeer, "\(String(describing: ended))")
    }
}

/// `UnixSocket` and `PeerCredentials` against the kernel.
@Suite struct UnixSocketTests {
    @Test func listenConnectAndAcceptCarryTheKernelsPeerCredentials() throws {
        let directory = try TempDirectory("esys")
        defer { directory.remove() }
        let path = directory.file("s.sock")
        let listener = try UnixSocket.listen(path: path, mode: 0o660)
        defer { close(listener) }
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o660)
        #expect(UnixSocket.boundPath(listener) == path)
        let client = try UnixSocket.connect(path: path)
        defer { close(client) }
        var accepted: Int32?
        for _ in 0..<100 where accepted == nil { accepted = try UnixSocket.accept(listener) ?? { usleep(1000); return nil }() }
        let server = try #require(accepted)
        defer { close(server) }
        let peer = try PeerCredentials.of(socket: server)
        #expect(peer == PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid()))
        #expect(try PeerCredentials.of(socket: client).pid == getpid())
    }

    @Test func connectingToNothingFailsAtOnceAndOverlongPathsAreRefused() throws {
        let directory = try TempDirectory("esys")
        defer { directory.remove() }
        #expect(throws: SystemError.self) { try UnixSocket.connect(path: directory.file("nobody.sock")) }
        let tooLong = directory.path + "/" + String(repeating: "x", count: UnixSocket.maxPathLength)
        let error = #expect(throws: SystemError.self) { try UnixSocket.listen(path: tooLong, mode: 0o600) }
        #expect(error?.errno == ENAMETOOLONG)
    }

    @Test func groupMembershipComesFromTheSystemDatabase() {
        #expect(PeerCredentials.user(0, isInGroup: "root"))
        #expect(!PeerCredentials.user(65534, isInGroup: "root"))
        #expect(!PeerCredentials.user(0, isInGroup: "no-such-group-earshot"))
    }
}
