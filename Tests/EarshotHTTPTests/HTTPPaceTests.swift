@testable import EarshotHTTP
import EarshotSystem
import Foundation
import Testing
import TestSupport

/// Issue 27: connections that do next to nothing cannot hold the server's threads — headers, the
/// body rate and the whole upload have deadlines on the injected clock that a trickle cannot
/// stretch — and a peer the handler refuses costs no thread: it is answered at once.
@Suite struct HTTPPaceTests {
    /// Admits at most `limit` connections at once, and counts what the server reports.
    final class Gate: HTTPHandler, @unchecked Sendable {
        private let lock = NSLock()
        private let limit: Int
        private var open = 0
        private var cuts: [HTTPSlowClient] = []
        init(limit: Int) { self.limit = limit }
        var openConnections: Int { lock.withLock { open } }
        var cutReasons: [HTTPSlowClient] { lock.withLock { cuts } }
        func admit(_ peer: HTTPPeer) -> HTTPResponse? {
            lock.withLock {
                guard open < limit else { return HTTPResponse.text("busy\n", status: 429, headers: [("Retry-After", "1")]) }
                open += 1
                return nil
            }
        }
        func closed(_ peer: HTTPPeer) { lock.withLock { open -= 1 } }
        func cut(_ peer: HTTPPeer, because reason: HTTPSlowClient) { lock.withLock { cuts.append(reason) } }
        func respond(to request: HTTPRequest) async -> HTTPResponse { .text("ok \(request.body.count)\n") }
    }

    static let pace = HTTPPace(headerTimeout: .seconds(10), minimumBodyBytesPerSecond: 1000, rateWindow: .seconds(2), maximumUpload: .seconds(30))

    /// The server on a manual clock, admitting through a ``Gate``.
    struct Served {
        let clock = ManualClock()
        let gate: Gate
        let http: HTTPServerTests.Served
        var server: HTTPServer { http.server }
        init(limit: Int = 16) throws {
            gate = Gate(limit: limit)
            http = try HTTPServerTests.Served(limits: HTTPLimits(pace: HTTPPaceTests.pace), clock: clock, handler: gate)
        }
        /// A raw connection (blocking) to the server, once the server has admitted it.
        func connect() async throws -> Int32 {
            let admitted = gate.openConnections
            let client = try UnixSocket.connect(path: http.socket)
            _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) & ~O_NONBLOCK)
            for _ in 0..<100 where gate.openConnections == admitted { try await Task.sleep(for: .milliseconds(20)) }
            return client
        }
        /// Moves the clock by `seconds`, a second at a time: each second `send` gives the body
        /// bytes it wrote, which the connection's thread is given (real) time to read before the
        /// clock moves; then the sweeper looks and goes back to sleep.
        func advance(_ seconds: Int, each send: () -> Int = { 0 }) async throws {
            for _ in 0..<seconds {
                await clock.sleepers(atLeast: 1)
                let expected = server.watch.receivedBodyBytes + send()
                for _ in 0..<100 where server.watch.receivedBodyBytes < expected { try await Task.sleep(for: .milliseconds(20)) }
                clock.advance(by: .seconds(1))
            }
            await clock.sleepers(atLeast: 1)
        }
        func curl(_ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) { try await http.curl(arguments) }
        func stop() async { await http.stop() }
    }

    /// Writes `text` (no SIGPIPE once the server has closed the connection).
    @discardableResult
    static func send(_ fd: Int32, _ text: String) -> Int { text.withCString { Glibc.send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) } }

    /// Whether the server closed `fd` (reads to its end, up to 5 s of real time for the connection
    /// thread to notice).
    static func closedByServer(_ fd: Int32) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        for _ in 0..<50 {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) >= 0 else { return false }
            if poller.revents != 0, read(fd, &buffer, buffer.count) <= 0 { return true }
        }
        return false
    }

    static let uploadHead = "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000000\r\n\r\n"

    @Test func aTrickledUploadIsCutByTheBodyRateNotKeptAliveByEachByte() async throws {
        let served = try Served()
        let trickle = try await served.connect()
        defer { close(trickle) }
        Self.send(trickle, Self.uploadHead)
        // A byte every second of the clock: an idle timeout would never fire; the rate rule does.
        try await served.advance(3) { Self.send(trickle, "x") }
        #expect(Self.closedByServer(trickle))
        #expect(served.gate.cutReasons == [.bodyTooSlow(bytesPerSecond: 1)])
        // The client saw the cut (shutdown); the server's thread then closes it.
        for _ in 0..<100 where served.gate.openConnections > 0 { try await Task.sleep(for: .milliseconds(20)) }
        #expect(served.gate.openConnections == 0, "its slot went back")
        // An upload at the rate goes through.
        let good = try await served.connect()
        defer { close(good) }
        Self.send(good, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: 6000\r\n\r\n")
        try await served.advance(3) { Self.send(good, String(repeating: "y", count: 2000)) }
        var reply = [UInt8](repeating: 0, count: 4096)
        let count = read(good, &reply, reply.count)
        #expect(String(decoding: reply.prefix(max(0, count)), as: UTF8.self).contains("ok 6000"))
        #expect(served.gate.cutReasons.count == 1)
        await served.stop()
    }

    @Test func headersTrickledByteByByteAreCutAtTheHeaderDeadline() async throws {
        let served = try Served()
        let slow = try await served.connect()
        defer { close(slow) }
        let head = Array("GET /x HTTP/1.1\r\nHost: x\r\n".utf8)
        var sent = 0
        try await served.advance(11) {
            // One header byte a second: never a complete head (and no body bytes to wait for).
            _ = head.withUnsafeBufferPointer { Glibc.send(slow, $0.baseAddress! + sent, 1, Int32(MSG_NOSIGNAL)) }
            sent += 1
            return 0
        }
        #expect(Self.closedByServer(slow))
        #expect(served.gate.cutReasons == [.headersTooSlow])
        await served.stop()
    }

    @Test func anUploadTakingLongerThanItsLimitIsCutWhateverItsRate() async throws {
        let served = try Served()
        let long = try await served.connect()
        defer { close(long) }
        Self.send(long, Self.uploadHead)
        try await served.advance(31) { Self.send(long, String(repeating: "z", count: 2500)) }
        #expect(Self.closedByServer(long))
        #expect(served.gate.cutReasons == [.uploadTooLong])
        await served.stop()
    }

    @Test func aRefusedPeerIsAnsweredAtOnceAndTheOthersAreServed() async throws {
        let served = try Served(limit: 2)
        let held = [try await served.connect(), try await served.connect()]
        // Both slots are taken by connections that send nothing: the next one hears 429 at once.
        await served.clock.sleepers(atLeast: 1)
        let refused = try await served.curl(["-i", "--data-binary", "a request with a body", "http://localhost/x"])
        #expect(refused.stdout.hasPrefix("HTTP/1.1 429") && refused.stdout.contains("Retry-After: 1") && refused.stdout.hasSuffix("429"), "\(refused)")
        close(held[0])
        // The server notices the close on the held connection's thread; then a slot is free.
        for _ in 0..<50 where served.gate.openConnections > 1 { try await Task.sleep(for: .milliseconds(100)) }
        let served2 = try await served.curl(["http://localhost/x"])
        #expect(served2.stdout.hasSuffix("200"), "\(served2)")
        close(held[1])
        await served.stop()
    }
}
