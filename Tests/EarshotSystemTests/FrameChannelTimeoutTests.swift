import EarshotSystem
import EarshotWire
import Foundation
import Synchronization
import Testing

/// Issue 8, defect 3 — the channel's handshake/frame and idle timeouts, on a socketpair: they must
/// close peers that hold a connection for nothing, and never one the daemon itself holds up.
@Suite struct ConnectionSlotDenialOfServiceChannelTests {
    /// A channel on one end of a socketpair; the other end is a plain blocking fd for the test.
    static func pair(_ options: FrameChannel.Options) throws -> (channel: FrameChannel, peer: Int32) {
        var fds: [Int32] = [0, 0]
        try systemCall("socketpair") { socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) }
        try UnixSocket.prepareInherited(fds[0])
        let channel = FrameChannel(fd: fds[0], options: options, label: "test.channel")
        channel.start()
        return (channel, fds[1])
    }

    static func write(_ fd: Int32, _ bytes: some Collection<UInt8>) throws {
        let array = Array(bytes)
        var offset = 0
        while offset < array.count {
            offset += try systemCall("send") { array[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }
        }
    }

    @Test func frameTimeoutDoesNotCountTheChannelsOwnBackPressure() async throws {
        let (channel, peer) = try Self.pair(FrameChannel.Options(maxBufferedFrames: 1, frameTimeout: 0.2))
        defer { close(peer); channel.close() }
        let first = try Frame(Ping(text: "one")).encoded(), second = try Frame(Ping(text: "two")).encoded()
        // The first frame fills the buffer, so the channel stops reading with half the second read.
        try Self.write(peer, first + second.prefix(10))
        var frames = channel.frames.makeAsyncIterator()
        try await Task.sleep(for: .milliseconds(600)) // three frame timeouts while the channel is paused
        #expect(try await frames.next()?.decode(Ping.self).text == "one")
        try Self.write(peer, second.dropFirst(10))
        #expect(try await frames.next()?.decode(Ping.self).text == "two")
    }

    @Test func frameBegunButNotFinishedIsDropped() async throws {
        let (channel, peer) = try Self.pair(FrameChannel.Options(frameTimeout: 0.2))
        defer { close(peer); channel.close() }
        let frame = try Frame(Ping(text: "slow")).encoded()
        try Self.write(peer, frame)
        try Self.write(peer, frame.prefix(5))
        var frames = channel.frames.makeAsyncIterator()
        #expect(try await frames.next()?.decode(Ping.self).text == "slow")
        await #expect(throws: ChannelError.frameTimeout(seconds: 0.2)) { _ = try await frames.next() }
    }

    @Test func idleTimeoutWaitsWhileTheOwnerIsBusy() async throws {
        let (channel, peer) = try Self.pair(FrameChannel.Options(idleTimeout: 0.2))
        defer { close(peer); channel.close() }
        let busy = Mutex(true)
        channel.setBusyCheck { busy.withLock { $0 } }
        try Self.write(peer, try Frame(Ping(text: "open a session")).encoded())
        var frames = channel.frames.makeAsyncIterator()
        #expect(try await frames.next()?.decode(Ping.self).text == "open a session")
        try await Task.sleep(for: .milliseconds(600)) // three idle timeouts, busy all along
        try await channel.send(Frame(Pong(text: "still open")))
        busy.withLock { $0 = false }
        let began = ContinuousClock.now
        await #expect(throws: ChannelError.idle(seconds: 0.2)) { _ = try await frames.next() }
        #expect(ContinuousClock.now - began < .seconds(3))
    }
}
