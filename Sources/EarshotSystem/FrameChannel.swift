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
    public var description: String {
        switch self {
        case .closed: "connection closed"
        case .slowPeer: "peer is not reading its output"
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
public final class FrameChannel: @unchecked Sendable {
    /// Tuning for one channel.
    public struct Options: Sendable {
        public var limits: FrameLimits
        public var maxBufferedFrames: Int
        public var highWaterBytes: Int
        public var maxQueuedBytes: Int
        /// Seconds queued output may sit without the peer reading any of it.
        public var stallTimeout: Double
        public init(limits: FrameLimits = .default, maxBufferedFrames: Int = 64, highWaterBytes: Int = 1 << 20, maxQueuedBytes: Int = 32 << 20, stallTimeout: Double = 30) {
            self.limits = limits
            self.maxBufferedFrames = maxBufferedFrames
            self.highWaterBytes = highWaterBytes
            self.maxQueuedBytes = maxQueuedBytes
            self.stallTimeout = stallTimeout
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
    private var lastProgress = DispatchTime.now()
    private var pendingCancels = 0

    /// Takes ownership of `fd`, a connected non-blocking socket. Call ``start()`` to begin I/O.
    public init(fd: Int32, options: Options = Options(), label: String = "earshot.channel") {
        self.fd = fd
        self.options = options
        self.queue = DispatchQueue(label: label)
        self.decoder = FrameDecoder(limits: options.limits)
        (stream, input) = AsyncThrowingStream.makeStream(of: Frame.self, throwing: (any Error).self)
    }

    /// The incoming frames. Iterate once.
    public var frames: Frames { Frames(channel: self) }

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
            if !output.isEmpty { flush() }
        }
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
        if queuedBytes == 0 { lastProgress = .now() }
        output += bytes
        flush()
    }

    private func readAvailable() {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while !inputDone {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                decoder.feed(buffer[0..<n])
                do {
                    while let frame = try decoder.next() {
                        bufferedFrames += 1
                        input.yield(frame)
                    }
                } catch {
                    finishInput(throwing: error)
                    return
                }
                if bufferedFrames >= options.maxBufferedFrames {
                    readSource?.suspend()
                    readSuspended = true
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
            if readSuspended, !inputDone, bufferedFrames <= options.maxBufferedFrames / 2 {
                readSuspended = false
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
            let n = output.withUnsafeBytes { raw in
                Glibc.send(fd, raw.baseAddress! + outputStart, queuedBytes, Int32(MSG_NOSIGNAL))
            }
            if n > 0 {
                outputStart += n
                lastProgress = .now()
                continue
            }
            let code = errno
            if n < 0 && code == EINTR { continue }
            if n < 0 && (code == EAGAIN || code == EWOULDBLOCK) { break }
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
        queue.asyncAfter(deadline: .now() + timeout) { [weak self] in
            guard let self, !closed, queuedBytes > 0 else { return }
            let idle = Double(DispatchTime.now().uptimeNanoseconds - lastProgress.uptimeNanoseconds) / 1e9
            if idle >= timeout { fail(ChannelError.slowPeer) } else { scheduleStallCheck() }
        }
    }

    private func fail(_ error: any Error) {
        shutdown(error)
    }

    private func shutdown(_ error: (any Error)?) {
        guard !closed else { return }
        closed = true
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
