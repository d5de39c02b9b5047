import EarshotSystem
import EarshotWire
import Foundation
import Synchronization
import Testing
import TestSupport

/// Issue 8, defect 3 — the channel's handshake/frame and idle timeouts, on a socketpair: they must
/// close peers that hold a connection for nothing, and never one the daemon itself holds up.
/// Issue 31: timed on an injected clock the tests advance, never on the wall clock.
@Suite struct ConnectionSlotDenialOfServiceChannelTests {
    /// A channel on one end of a socketpair, timed by `clock`; the other end is a plain blocking
    /// fd for the test.
    static func pair(_ options: FrameChannel.Options, clock: ManualClock) throws -> (channel: FrameChannel, peer: Int32) {
        var fds: [Int32] = [0, 0]
        try systemCall("socketpair") { socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) }
        try UnixSocket.prepareInherited(fds[0])
        let channel = FrameChannel(fd: fds[0], options: options, label: "test.channel", clock: clock)
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

    /// Returns once the channel's state satisfies `condition` (it reads on its own queue).
    static func until(_ channel: FrameChannel, _ condition: (FrameChannel.Snapshot) -> Bool) async {
        while !condition(await channel.snapshot()) { await Task.yield() }
    }

    /// Moves `clock` on by `step`, `times` times, each once the channel's timer sleeps on it.
    static func advance(_ clock: ManualClock, by step: Duration, times: Int = 1) async {
        for _ in 0..<times {
            await clock.sleepers(atLeast: 1)
            clock.advance(by: step)
        }
    }

    @Test func frameTimeoutDoesNotCountTheChannelsOwnBackPressure() async throws {
        let clock = ManualClock()
        let (channel, peer) = try Self.pair(FrameChannel.Options(maxBufferedFrames: 1, frameTimeout: 0.2), clock: clock)
        defer { close(peer); channel.close() }
        let first = try Frame(Ping(text: "one")).encoded(), second = try Frame(Ping(text: "two")).encoded()
        // The first frame fills the buffer, so the channel stops reading with half the second read.
        try Self.write(peer, first + second.prefix(10))
        await Self.until(channel) { $0.readingPaused && $0.partialFrameBytes == 10 }
        await Self.advance(clock, by: .milliseconds(600)) // three frame timeouts while the channel is paused
        var frames = channel.frames.makeAsyncIterator()
        #expect(try await frames.next()?.decode(Ping.self).text == "one")
        try Self.write(peer, second.dropFirst(10))
        #expect(try await frames.next()?.decode(Ping.self).text == "two")
    }

    @Test func frameBegunButNotFinishedIsDropped() async throws {
        let clock = ManualClock()
        let (channel, peer) = try Self.pair(FrameChannel.Options(frameTimeout: 0.2), clock: clock)
        defer { close(peer); channel.close() }
        let frame = try Frame(Ping(text: "slow")).encoded()
        try Self.write(peer, frame)
        try Self.write(peer, frame.prefix(5))
        var frames = channel.frames.makeAsyncIterator()
        #expect(try await frames.next()?.decode(Ping.self).text == "slow")
        await Self.until(channel) { $0.partialFrameBytes == 5 }
        await Self.advance(clock, by: .milliseconds(199))
        #expect(await channel.snapshot().partialFrameBytes == 5, "not before its time")
        await Self.advance(clock, by: .milliseconds(1))
        await #expect(throws: ChannelError.frameTimeout(seconds: 0.2)) { _ = try await frames.next() }
    }

    @Test func idleTimeoutWaitsWhileTheOwnerIsBusy() async throws {
        let clock = ManualClock()
        let (channel, peer) = try Self.pair(FrameChannel.Options(idleTimeout: 0.2), clock: clock)
        defer { close(peer); channel.close() }
        let busy = Mutex(true)
        channel.setBusyCheck { busy.withLock { $0 } }
        try Self.write(peer, try Frame(Ping(text: "open a session")).encoded())
        var frames = channel.frames.makeAsyncIterator()
        #expect(try await frames.next()?.decode(Ping.self).text == "open a session")
        await Self.advance(clock, by: .milliseconds(200), times: 3) // three idle timeouts, busy all along
        try await channel.send(Frame(Pong(text: "still open")))
        busy.withLock { $0 = false }
        await Self.advance(clock, by: .milliseconds(200))
        await #expect(throws: ChannelError.idle(seconds: 0.2)) { _ = try await frames.next() }
    }

    @Test func aPeerThatReadsNothingIsCutAfterTheStallTimeout() async throws {
        let clock = ManualClock()
        let (channel, peer) = try Self.pair(FrameChannel.Options(stallTimeout: 30), clock: clock)
        defer { close(peer); channel.close() }
        // More than the socket buffers and the high-water mark hold: the send waits for a peer
        // that never reads.
        let big = try Frame(Ping(text: String(repeating: "x", count: 4 << 20)))
        let sending = Task { try await channel.send(big) }
        await Self.until(channel) { $0.queuedOutputBytes > 1 << 20 }
        await Self.advance(clock, by: .seconds(29))
        #expect(await channel.snapshot().queuedOutputBytes > 0, "not cut before its time")
        await Self.advance(clock, by: .seconds(1))
        await #expect(throws: ChannelError.slowPeer) { try await sending.value }
    }
}
