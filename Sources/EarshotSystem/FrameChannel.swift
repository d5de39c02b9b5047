import Dispatch
import EarshotWire
#if canImport(Glibc)
import Glibc
#endif

/// Why a ``FrameChannel`` stopped taking output.
public enum ChannelError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The channel was closed (by either side).
    case closed
    /// The peer did not read its output within the stall timeout or let it grow past the limit.
    case slowPeer
    /// The peer did not complete its first frame, or a frame it had begun, within `seconds`
    /// (``FrameChannel/Options/frameTimeout``).
    case frameTimeout(seconds: Double)
    /// Nothing moved either way for `seconds` while the owner had nothing in flight
    /// (``FrameChannel/Options/idleTimeout``).
    case idle(seconds: Double)
    public var description: String {
        switch self {
        case .closed: "connection closed"
        case .slowPeer: "peer is not reading its output"
        case .frameTimeout(let seconds): "no complete frame within \(seconds) s"
        case .idle(let seconds): "idle for \(seconds) s"
        }
    }
}

/// A framed, full-duplex connection over a non-blocking socket, driven by Dispatch sources on its
/// own serial queue: socket I/O never runs on the Swift cooperative pool.
///
/// Incoming frames arrive through ``frames`` (which throws ``FrameError`` on malformed input and
/// ``SystemError`` on socket failure); reading pauses while `maxBufferedFrames` are unconsumed.
/// Outgoing frames are queued; ``send(_:)`` waits while more than `highWaterBytes` are queued,
/// ``post(_:)`` never waits and drops the peer when `maxQueuedBytes` is exceeded.
///
/// Optional timeouts keep a peer from holding the connection for nothing: ``Options/frameTimeout``
/// (the first frame, and every frame once its first byte arrived, must arrive whole in time;
/// time the channel itself stops reading for back-pressure does not count) and
/// ``Options/idleTimeout`` (no traffic either way while ``setBusyCheck(_:)`` says nothing is in
/// flight). Both end the input with a ``ChannelError`` and close the channel.
public final class FrameChannel: @unchecked Sendable {
    /// Tuning for one channel.
    public struct Options: Sendable {
        public var limits: FrameLimits
        public var maxBufferedFrames: Int
        public var highWaterBytes: Int
        public var maxQueuedBytes: Int
        /// Seconds queued output may sit without the peer reading any of it.
        public var stallTimeout: Double
        /// Seconds the peer has for its first frame (from ``start()``) and for each later frame
        /// (from its first byte) while the channel reads; nil: no limit. Stops slow-loris senders.
        public var frameTimeout: Double?
        /// Seconds without traffic either way after which the channel closes, unless nothing is
        /// buffered and the busy check says the owner has work in flight; nil: never.
        public var idleTimeout: Double?
        public init(limits: FrameLimits = .default, maxBufferedFrames: Int = 64, highWaterBytes: Int = 1 << 20, maxQueuedBytes: Int = 32 << 20, stallTimeout: Double = 30,
                    frameTimeout: Double? = nil, idleTimeout: Double? = nil) {
            self.limits = limits
            self.maxBufferedFrames = maxBufferedFrames
            self.highWaterBytes = highWaterBytes
            self.maxQueuedBytes = maxQueuedBytes
            self.stallTimeout = stallTimeout
            self.frameTimeout = frameTimeout
            self.idleTimeout = idleTimeout
        }
    }

    /// The incoming frames, in order. Ends at the peer's end of stream.
    public struct Frames: AsyncSequence, Sendable {
        public typealias Element = Frame
        let channel: FrameChannel
        public struct AsyncIterator: AsyncIteratorProtocol {
            var base: AsyncThrowingStream<Frame, any Error>.AsyncIterator
            let channel: FrameChannel
            public mutating func next() async throws -> Frame? {
                let frame = try await base.next()
                if frame != nil { channel.consumed() }
                return frame
            }
        }
        public func makeAsyncIterator() -> AsyncIterator {
            AsyncIterator(base: channel.stream.makeAsyncIterator(), channel: channel)
        }
    }

    public let fd: Int32
    public let options: Options
    /// Times every timeout (the daemon's injected clock; tests advance a manual one).
    private let clock: any ServiceClock
    private let queue: DispatchQueue
    private let stream: AsyncThrowingStream<Frame, any Error>
    private let input: AsyncThrowingStream<Frame, any Error>.Continuation

    // Confined to `queue`.
    private var decoder: FrameDecoder
    private var readSource: DispatchSourceRead?
    private var writeSource: DispatchSourceWrite?
    private var readSuspended = false
    private var writeSuspended = false
    private var output: [UInt8] = []
    private var outputStart = 0
    private var waiters: [CheckedContinuation<Void, any Error>] = []
    private var bufferedFrames = 0
    private var inputDone = false
    private var closed = false
    private var closeWhenFlushed = false
    /// When output last moved (or began to wait), on ``clock``.
    private var lastProgress: Duration
    private var pendingCancels = 0
    // Timeouts (confined to `queue`).
    private var timer: (any ScheduledWake)?
    private var timerDeadline: Duration?
    /// When the frame being received began (before the first frame: when the channel started);
    /// nil when no frame is under way or reading is paused.
    private var frameStarted: Duration?
    private var receivedFrame = false
    /// Last byte in or out, or frame consumed.
    private var lastActivity: Duration
    private var busyCheck: (@Sendable () -> Bool)?

    /// Takes ownership of `fd`, a connected non-blocking socket. Call ``start()`` to begin I/O.
    /// `clock` times the timeouts.
    public init(fd: Int32, options: Options = Options(), label: String = "earshot.channel", clock: any ServiceClock = SystemServiceClock()) {
        self.fd = fd
        self.options = options
        self.clock = clock
        lastProgress = clock.elapsed
        lastActivity = lastProgress
        self.queue = DispatchQueue(label: label)
        self.decoder = FrameDecoder(limits: options.limits)
        (stream, input) = AsyncThrowingStream.makeStream(of: Frame.self, throwing: (any Error).self)
    }

    /// The incoming frames. Iterate once.
    public var frames: Frames { Frames(channel: self) }

    /// What a channel holds at one moment.
    public struct Snapshot: Sendable, Equatable {
        /// Frames decoded and not yet consumed.
        public var bufferedFrames: Int
        /// Bytes of a frame begun and not yet complete.
        public var partialFrameBytes: Int
        /// Output queued and not yet sent.
        public var queuedOutputBytes: Int
        /// Reading is paused because ``Options/maxBufferedFrames`` frames wait to be consumed.
        public var readingPaused: Bool
    }

    /// What the channel holds now, read on its queue.
    public func snapshot() async -> Snapshot {
        await withCheckedContinuation { continuation in
            queue.async { [self] in
                continuation.resume(returning: Snapshot(bufferedFrames: bufferedFrames, partialFrameBytes: decoder.bufferedByteCount,
                                                        queuedOutputBytes: queuedBytes, readingPaused: readSuspended))
            }
        }
    }

    /// Starts reading and writing.
    public func start() {
        queue.async { [self] in
            guard !closed, readSource == nil else { return }
            let read = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
            read.setEventHandler { [unowned self] in readAvailable() }
            read.setCancelHandler { [self] in sourceCancelled() }
            let write = DispatchSource.makeWriteSource(fileDescriptor: fd, queue: queue)
            write.setEventHandler { [unowned self] in flush() }
            write.setCancelHandler { [self] in sourceCancelled() }
            readSource = read
            writeSource = write
            pendingCancels = 2
            read.resume()
            write.resume()
            write.suspend()
            writeSuspended = true
            lastActivity = clock.elapsed
            if options.frameTimeout != nil { frameStarted = clock.elapsed }
            armTimer()
            if !output.isEmpty { flush() }
        }
    }

    /// Sets what the idle timeout asks before closing: whether the owner has work in flight
    /// (a request being served, an open session). Runs on the channel's queue; must not block.
    public func setBusyCheck(_ check: @escaping @Sendable () -> Bool) {
        queue.async { [self] in busyCheck = check }
    }

    /// Queues `frame` and returns once queued output is below the high-water mark.
    public func send(_ frame: Frame) async throws {
        let bytes = try frame.encoded()
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            queue.async { [self] in
                guard !closed, !closeWhenFlushed else { return continuation.resume(throwing: ChannelError.closed) }
                enqueue(bytes)
                if closed { return continuation.resume(throwing: ChannelError.closed) }
                if queuedBytes <= options.highWaterBytes {
                    continuation.resume()
                } else {
                    waiters.append(continuation)
                    scheduleStallCheck()
                }
            }
        }
    }

    /// Queues `frame` without waiting; a peer whose queue passes `maxQueuedBytes` is disconnected.
    public func post(_ frame: Frame) {
        guard let bytes = try? frame.encoded() else { return }
        queue.async { [self] in
            guard !closed, !closeWhenFlushed else { return }
            enqueue(bytes)
            if queuedBytes > options.maxQueuedBytes { fail(ChannelError.slowPeer) }
        }
    }

    /// Closes once everything queued has been written (or the peer stops reading).
    public func closeAfterFlush() {
        queue.async { [self] in
            guard !closed else { return }
            closeWhenFlushed = true
            stopReading()
            if queuedBytes == 0 { shutdown(nil) } else { scheduleStallCheck() }
        }
    }

    /// Closes now, discarding queued output.
    public func close() {
        queue.async { [self] in shutdown(nil) }
    }

    private var queuedBytes: Int { output.count - outputStart }

    private func enqueue(_ bytes: [UInt8]) {
        if queuedBytes == 0 { lastProgress = clock.elapsed }
        output += bytes
        flush()
    }

    private func readAvailable() {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while !inputDone {
            // Timed before the call: a peer may act on what the call did before the next line runs.
            let now = clock.elapsed
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                lastActivity = now
                let wasInFrame = decoder.bufferedByteCount > 0
                decoder.feed(buffer[0..<n])
                var completed = false
                do {
                    while let frame = try decoder.next() {
                        bufferedFrames += 1
                        completed = true
                        input.yield(frame)
                    }
                } catch {
                    finishInput(throwing: error)
                    return
                }
                frameProgress(completed: completed, wasInFrame: wasInFrame, at: now)
                if bufferedFrames >= options.maxBufferedFrames {
                    readSource?.suspend()
                    readSuspended = true
                    frameStarted = nil // our pause, not the peer's delay
                    return
                }
            } else if n == 0 {
                do {
                    try decoder.finish()
                    finishInput(throwing: nil)
                } catch {
                    finishInput(throwing: error)
                }
                return
            } else {
                let code = errno
                if code == EINTR { continue }
                if code == EAGAIN || code == EWOULDBLOCK { return }
                finishInput(throwing: SystemError("read", errno: code))
                return
            }
        }
    }

    fileprivate func consumed() {
        queue.async { [self] in
            bufferedFrames -= 1
            lastActivity = clock.elapsed
            if readSuspended, !inputDone, bufferedFrames <= options.maxBufferedFrames / 2 {
                readSuspended = false
                if options.frameTimeout != nil, decoder.bufferedByteCount > 0 { frameStarted = clock.elapsed }
                armTimer()
                readSource?.resume()
            }
        }
    }

    private func finishInput(throwing error: (any Error)?) {
        guard !inputDone else { return }
        inputDone = true
        stopReading()
        input.finish(throwing: error)
    }

    private func stopReading() {
        guard let read = readSource, !read.isCancelled else { return }
        if readSuspended {
            readSuspended = false
            read.resume()
        }
        read.cancel()
    }

    private func flush() {
        while queuedBytes > 0 {
            let now = clock.elapsed // before the call, as in readAvailable()
            let n = output.withUnsafeBytes { raw in
                Glibc.send(fd, raw.baseAddress! + outputStart, queuedBytes, Int32(MSG_NOSIGNAL))
            }
            if n > 0 {
                outputStart += n
                lastProgress = now
                lastActivity = now
                continue
            }
            let code = errno
            if n < 0 && code == EINTR { continue }
            if n < 0 && (code == EAGAIN || code == EWOULDBLOCK) { break }
            // The peer may have said why it went away (e.g. an error before closing): deliver
            // what it sent before failing.
            if readSource != nil, !readSuspended { readAvailable() }
            fail(SystemError("send", errno: code))
            return
        }
        if queuedBytes == 0 {
            output.removeAll(keepingCapacity: output.capacity <= 1 << 20)
            outputStart = 0
        } else if outputStart > 1 << 20 {
            output.removeFirst(outputStart)
            outputStart = 0
        }
        if queuedBytes <= options.highWaterBytes, !waiters.isEmpty {
            let ready = waiters
            waiters = []
            ready.forEach { $0.resume() }
        }
        if let write = writeSource {
            if queuedBytes > 0, writeSuspended {
                writeSuspended = false
                write.resume()
            } else if queuedBytes == 0, !writeSuspended {
                writeSuspended = true
                write.suspend()
            }
        }
        if queuedBytes == 0, closeWhenFlushed { shutdown(nil) }
    }

    private func scheduleStallCheck() {
        let timeout = options.stallTimeout
        _ = clock.schedule(after: .seconds(timeout), on: queue) { [weak self] in
            guard let self, !closed, queuedBytes > 0 else { return }
            if clock.elapsed - lastProgress >= .seconds(timeout) { fail(ChannelError.slowPeer) } else { scheduleStallCheck() }
        }
    }

    private func fail(_ error: any Error) {
        shutdown(error)
    }

    /// Updates the frame clock after a read: a frame is timed from its first byte; the first
    /// frame from ``start()``.
    private func frameProgress(completed: Bool, wasInFrame: Bool, at now: Duration) {
        guard options.frameTimeout != nil else { return }
        if completed { receivedFrame = true }
        if receivedFrame {
            if decoder.bufferedByteCount == 0 {
                frameStarted = nil
            } else if completed || !wasInFrame || frameStarted == nil {
                frameStarted = now
            }
        }
        armTimer()
    }

    /// The earliest moment a timeout could expire, if any applies.
    private func nextDeadline() -> Duration? {
        guard !closed, !inputDone, !closeWhenFlushed else { return nil }
        var deadline: Duration?
        if let timeout = options.frameTimeout, let started = frameStarted, !readSuspended { deadline = started + .seconds(timeout) }
        if let timeout = options.idleTimeout {
            let idle = lastActivity + .seconds(timeout)
            deadline = deadline.map { min($0, idle) } ?? idle
        }
        return deadline
    }

    /// Makes the timer fire no later than the next deadline (it re-checks when it fires), or
    /// stops it when there is none.
    private func armTimer() {
        guard let deadline = nextDeadline() else {
            // Nothing to time (a frame completed, no idle timeout): no wake-up for nothing.
            timer?.cancel()
            timer = nil
            timerDeadline = nil
            return
        }
        if let scheduled = timerDeadline, scheduled <= deadline { return }
        timer?.cancel()
        timer = clock.schedule(after: deadline - clock.elapsed, on: queue) { [weak self] in self?.deadlineReached() }
        timerDeadline = deadline
    }

    private func deadlineReached() {
        timerDeadline = nil
        guard !closed, !inputDone, !closeWhenFlushed else { return }
        let now = clock.elapsed
        if let timeout = options.frameTimeout, let started = frameStarted, !readSuspended, started + .seconds(timeout) <= now {
            return fail(ChannelError.frameTimeout(seconds: timeout))
        }
        if let timeout = options.idleTimeout, lastActivity + .seconds(timeout) <= now {
            let idle = queuedBytes == 0 && bufferedFrames == 0 && decoder.bufferedByteCount == 0 && !(busyCheck?() ?? false)
            if idle { return fail(ChannelError.idle(seconds: timeout)) }
            lastActivity = now // busy counts as activity
        }
        armTimer()
    }

    private func shutdown(_ error: (any Error)?) {
        guard !closed else { return }
        closed = true
        timer?.cancel()
        timer = nil
        finishInput(throwing: error)
        let pending = waiters
        waiters = []
        pending.forEach { $0.resume(throwing: error ?? ChannelError.closed) }
        output = []
        outputStart = 0
        if let write = writeSource {
            if writeSuspended {
                writeSuspended = false
                write.resume()
            }
            write.cancel()
        }
        if readSource == nil { Glibc.close(fd) }
    }

    private func sourceCancelled() {
        // The write source is only cancelled by shutdown, so reaching zero means closed.
        pendingCancels -= 1
        if pendingCancels == 0 { Glibc.close(fd) }
    }

    deinit {
        if readSource == nil, !closed { Glibc.close(fd) }
    }
}
