import Foundation

/// How long a client may take over what it must send, so that connections that do next to nothing
/// cannot hold the server's threads. None of these is an idle timeout a trickle of bytes resets.
public struct HTTPPace: Sendable, Hashable {
    /// From accepting a connection (or the end of its previous request) to the end of a request's
    /// headers.
    public var headerTimeout: Duration
    /// Least body rate, in bytes per second, measured over each ``rateWindow`` of an upload.
    public var minimumBodyBytesPerSecond: Int
    public var rateWindow: Duration
    /// Longest a whole upload (from the end of the headers to the last body byte) may take.
    public var maximumUpload: Duration

    public init(headerTimeout: Duration = .seconds(10), minimumBodyBytesPerSecond: Int = 4096, rateWindow: Duration = .seconds(10),
                maximumUpload: Duration = .seconds(300)) {
        self.headerTimeout = headerTimeout
        self.minimumBodyBytesPerSecond = minimumBodyBytesPerSecond
        self.rateWindow = rateWindow
        self.maximumUpload = maximumUpload
    }
}

/// Why a connection was cut.
public enum HTTPSlowClient: Sendable, Hashable, CustomStringConvertible {
    case headersTooSlow
    case bodyTooSlow(bytesPerSecond: Int)
    case uploadTooLong

    /// The rule's name in metrics: `headers`, `body_rate`, `upload_time`.
    public var label: String {
        switch self {
        case .headersTooSlow: "headers"
        case .bodyTooSlow: "body_rate"
        case .uploadTooLong: "upload_time"
        }
    }

    public var description: String {
        switch self {
        case .headersTooSlow: "its request headers took too long"
        case .bodyTooSlow(let rate): "it uploaded at \(rate) bytes/s, below the minimum"
        case .uploadTooLong: "its upload took too long"
        }
    }
}

/// The server's admitted connections and where each is in its request, with the times that
/// ``HTTPPace`` judges (read from an injected clock as durations since it started). Thread-safe:
/// connection threads report progress, the sweeper asks which connections to cut.
final class ConnectionWatch: @unchecked Sendable {
    // Unchecked: state is guarded by `lock`.
    private enum Phase {
        /// Waiting for a request's headers, since `since`.
        case headers(since: Duration)
        /// Receiving a body: bytes so far, when the upload and the current rate window began and
        /// the bytes by then.
        case body(started: Duration, bytes: Int, windowStart: Duration, windowBytes: Int)
        /// The handler is working or the response is going out: the client owes nothing.
        case answering
        /// Cut: its thread is closing it.
        case cut
    }

    private struct Entry {
        var peer: HTTPPeer
        var phase: Phase
    }

    private let lock = NSLock()
    private let pace: HTTPPace
    private var entries: [Int32: Entry] = [:]
    private var bodyBytes = 0

    init(pace: HTTPPace) { self.pace = pace }

    /// A connection was admitted at `now`.
    func admitted(_ fd: Int32, peer: HTTPPeer, at now: Duration) {
        lock.withLock { entries[fd] = Entry(peer: peer, phase: .headers(since: now)) }
    }

    /// A request's headers ended; its body (if any) starts.
    func headersEnded(_ fd: Int32, at now: Duration) {
        lock.withLock {
            if case .cut = entries[fd]?.phase { return }
            entries[fd]?.phase = .body(started: now, bytes: 0, windowStart: now, windowBytes: 0)
        }
    }

    /// `count` body bytes arrived.
    func received(_ fd: Int32, bytes count: Int) {
        lock.withLock {
            bodyBytes += count
            guard case .body(let started, let bytes, let windowStart, let windowBytes) = entries[fd]?.phase else { return }
            entries[fd]?.phase = .body(started: started, bytes: bytes + count, windowStart: windowStart, windowBytes: windowBytes)
        }
    }

    /// The request is complete: the client owes nothing until its next request.
    func answering(_ fd: Int32) {
        lock.withLock { if case .cut = entries[fd]?.phase {} else { entries[fd]?.phase = .answering } }
    }

    /// The response went out; a kept-alive connection waits for its next request's headers.
    func responded(_ fd: Int32, at now: Duration) {
        lock.withLock {
            guard let phase = entries[fd]?.phase else { return }
            if case .cut = phase { return }
            entries[fd]?.phase = .headers(since: now)
        }
    }

    /// The connection closed: its peer, if it was admitted.
    func closed(_ fd: Int32) -> HTTPPeer? {
        lock.withLock { entries.removeValue(forKey: fd)?.peer }
    }

    /// Body bytes received since the server started (all connections).
    var receivedBodyBytes: Int { lock.withLock { bodyBytes } }

    /// The connections that broke a rule by `now`, and why; `cut` runs for each under the lock, so
    /// a connection cannot close (and its fd be reused) in between.
    func sweep(at now: Duration, cut: (Int32, HTTPPeer, HTTPSlowClient) -> Void) {
        lock.withLock {
            for fd in Array(entries.keys) {
                guard let verdict = verdict(&entries[fd]!.phase, at: now) else { continue }
                entries[fd]!.phase = .cut
                cut(fd, entries[fd]!.peer, verdict)
            }
        }
    }

    /// Judges one connection at `now`, starting a new rate window when one has passed.
    private func verdict(_ phase: inout Phase, at now: Duration) -> HTTPSlowClient? {
        switch phase {
        case .answering, .cut:
            return nil
        case .headers(let since):
            return now - since > pace.headerTimeout ? .headersTooSlow : nil
        case .body(let started, let bytes, let windowStart, let windowBytes):
            if now - started > pace.maximumUpload { return .uploadTooLong }
            let window = now - windowStart
            guard window >= pace.rateWindow else { return nil }
            let seconds = Double(window.components.seconds) + Double(window.components.attoseconds) / 1e18
            let rate = Double(bytes - windowBytes) / seconds
            if rate < Double(pace.minimumBodyBytesPerSecond) { return .bodyTooSlow(bytesPerSecond: Int(rate)) }
            phase = .body(started: started, bytes: bytes, windowStart: now, windowBytes: bytes)
            return nil
        }
    }
}
