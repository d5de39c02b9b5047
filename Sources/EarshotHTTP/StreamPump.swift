import CMicroHTTPD
import Foundation

/// Carries a streamed body from its `AsyncStream` (on the Swift pool) to libmicrohttpd's content
/// reader (on the connection's own thread, which may wait). Buffered output is bounded: a client
/// that stops reading past ``limit`` is disconnected instead of growing the daemon.
final class StreamPump: @unchecked Sendable {
    static let limit = 8 << 20
    private let condition = NSCondition()
    // Guarded by `condition`.
    private var buffer = Data()
    private var ended = false
    private var overflowed = false
    private var task: Task<Void, Never>?
    private let exchange: Exchange

    init(_ stream: AsyncStream<Data>, exchange: Exchange) {
        self.exchange = exchange
        task = Task { [weak self] in
            for await chunk in stream {
                guard let self, self.append(chunk) else { return }
            }
            self?.finish()
        }
    }

    private func append(_ chunk: Data) -> Bool {
        condition.withLock {
            if buffer.count + chunk.count > Self.limit { overflowed = true } else { buffer.append(chunk) }
            condition.broadcast()
            return !overflowed
        }
    }

    private func finish() {
        condition.withLock {
            ended = true
            condition.broadcast()
        }
    }

    /// Copies up to `max` bytes, waiting for some; -1 at the end, -2 when the client left.
    private func read(into destination: UnsafeMutablePointer<CChar>, max: Int) -> Int {
        condition.lock()
        defer { condition.unlock() }
        while buffer.isEmpty, !ended, !overflowed {
            condition.unlock()
            let gone = exchange.abandoned()
            condition.lock()
            if gone { return earshot_mhd_reader_error }
            _ = condition.wait(until: Date(timeIntervalSinceNow: 0.2))
        }
        if overflowed { return earshot_mhd_reader_error }
        if buffer.isEmpty { return earshot_mhd_reader_end }
        let count = min(max, buffer.count)
        buffer.withUnsafeBytes { source in destination.update(from: source.baseAddress!.assumingMemoryBound(to: CChar.self), count: count) }
        buffer.removeFirst(count)
        return count
    }

    static let read: MHD_ContentReaderCallback = { cls, _, destination, max in
        guard let cls, let destination else { return earshot_mhd_reader_error }
        return Unmanaged<StreamPump>.fromOpaque(cls).takeUnretainedValue().read(into: destination, max: max)
    }

    static let release: MHD_ContentReaderFreeCallback = { cls in
        guard let cls else { return }
        let pump = Unmanaged<StreamPump>.fromOpaque(cls).takeRetainedValue()
        pump.condition.withLock { pump.task?.cancel() }
    }
}
