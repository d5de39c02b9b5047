import EarshotHTTP
import EarshotSystem
import Foundation
import Testing
import TestSupport

/// `HTTPServer` over a real Unix socket, driven by real `curl`.
@Suite struct HTTPServerTests {
    /// Echoes what it was given, as JSON.
    struct Echo: HTTPHandler {
        struct Reply: Codable {
            var method: String, path: String, query: [String: String], uid: UInt32?
            var body: Int, fields: [String: [String]], files: [String: Int], filename: String?
        }
        func screen(_ head: HTTPRequestHead) -> HTTPResponse? {
            head.header("authorization") == "Bearer wrong" ? .text("no\n", status: 401) : nil
        }
        func respond(to request: HTTPRequest) async -> HTTPResponse {
            if request.head.path == "/stream" {
                let (events, continuation) = AsyncStream.makeStream(of: Data.self)
                Task {
                    for index in 1...3 { continuation.yield(Data("data: \(index)\n\n".utf8)) }
                    continuation.finish()
                }
                return .eventStream(events)
            }
            if request.head.path == "/slow" {
                try? await Task.sleep(for: .seconds(600))
                return .text(Task.isCancelled ? "cancelled" : "late")
            }
            var uid: UInt32?
            if case .local(let credentials) = request.head.peer { uid = credentials.uid }
            return .json(Reply(method: request.head.method, path: request.head.path, query: request.head.query, uid: uid, body: request.body.count,
                               fields: request.form?.fields ?? [:], files: (request.form?.files ?? [:]).mapValues(\.data.count),
                               filename: request.form?.files["file"]?.filename))
        }
    }

    struct Served {
        let directory: TempDirectory
        let socket: String
        let fd: Int32
        let server: HTTPServer
        init(limits: HTTPLimits = HTTPLimits(), clock: any ServiceClock = SystemServiceClock(), handler: any HTTPHandler = Echo()) throws {
            directory = try TempDirectory("http")
            directory.removeAtExit()
            socket = directory.file("http.sock")
            fd = try UnixSocket.listen(path: socket, mode: 0o600)
            server = try HTTPServer(listening: fd, local: true, limits: limits, clock: clock, handler: handler)
        }
        func curl(_ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
            try await ChildProcess.run("/usr/bin/curl", ["-sS", "--unix-socket", socket, "-w", "\n%{http_code}"] + arguments, in: directory)
        }
        func stop() async {
            let server = self.server
            await withCheckedContinuation { done in Thread { server.stop(); done.resume() }.start() }
            close(fd)
            directory.remove()
        }
    }

    static func decode(_ output: String) throws -> (code: Int, reply: Echo.Reply) {
        let lines = output.split(separator: "\n")
        let code = try #require(Int(lines.last ?? ""))
        return (code, try JSONDecoder().decode(Echo.Reply.self, from: Data(lines.dropLast().joined(separator: "\n").utf8)))
    }

    @Test func getCarriesPathQueryAndThePeersUID() async throws {
        let served = try Served()
        let result = try await served.curl(["http://localhost/v1/models?limit=2"])
        await served.stop()
        let (code, reply) = try Self.decode(result.stdout)
        #expect(code == 200)
        #expect(reply.method == "GET" && reply.path == "/v1/models" && reply.query == ["limit": "2"])
        #expect(reply.uid == getuid())
    }

    @Test func multipartFormIsParsedWithRepeatedFieldsAndAFile() async throws {
        let served = try Served()
        let audio = try served.directory.write("a.wav", String(repeating: "x", count: 300_000))
        let result = try await served.curl(["-F", "file=@\(audio)", "-F", "model=whisper-1", "-F", "timestamp_granularities[]=word",
                                            "-F", "timestamp_granularities[]=segment", "http://localhost/v1/audio/transcriptions"])
        await served.stop()
        let (code, reply) = try Self.decode(result.stdout)
        #expect(code == 200)
        #expect(reply.files == ["file": 300_000] && reply.filename == "a.wav")
        #expect(reply.fields["model"] == ["whisper-1"])
        #expect(reply.fields["timestamp_granularities[]"] == ["word", "segment"])
    }

    @Test func bodyOverTheLimitIs413WithoutBeingBuffered() async throws {
        let served = try Served(limits: HTTPLimits(maxBodyBytes: 100_000))
        let big = try served.directory.write("big.bin", String(repeating: "y", count: 400_000))
        let declared = try await served.curl(["--data-binary", "@\(big)", "http://localhost/upload"])
        // Chunked: no length declared, so the limit is found while reading; the rest is read and
        // dropped, so the client hears the 413 instead of a broken pipe.
        let chunked = try await served.curl(["-H", "Transfer-Encoding: chunked", "--data-binary", "@\(big)", "http://localhost/upload"])
        let small = try await served.curl(["-H", "Content-Type: application/octet-stream", "--data-binary", "hello", "http://localhost/upload"])
        await served.stop()
        #expect(declared.stdout.hasSuffix("413"), "\(declared)")
        #expect(chunked.stdout.hasSuffix("413"), "\(chunked)")
        #expect(try Self.decode(small.stdout).reply.body == 5)
    }

    @Test func screenAnswersBeforeTheBody() async throws {
        let served = try Served()
        let result = try await served.curl(["-H", "Authorization: Bearer wrong", "--data-binary", "abc", "http://localhost/x"])
        await served.stop()
        #expect(result.stdout.hasSuffix("401"), "\(result)")
    }

    @Test func serverSentEventsArriveInOrder() async throws {
        let served = try Served()
        let result = try await served.curl(["-N", "http://localhost/stream"])
        await served.stop()
        #expect(result.stdout == "data: 1\n\ndata: 2\n\ndata: 3\n\n\n200", "\(result)")
    }

    /// A client that hangs up while its handler runs cancels the handler, and `stop()` cancels the
    /// rest rather than waiting for them.
    @Test func vanishingClientCancelsItsHandler() async throws {
        let served = try Served()
        let result = try await served.curl(["-m", "1", "http://localhost/slow"])
        #expect(result.status == 28, "curl timed out as asked: \(result)")
        let other = try await served.curl(["http://localhost/after"])
        #expect(try Self.decode(other.stdout).code == 200, "the server still serves others")
        await served.stop()
    }

    /// Regression (HTTPFrontTests, flaky): libmicrohttpd sometimes announced a form part with an
    /// empty piece before its data, both at offset 0, and the field read `["", "word"]`. The body
    /// arrives a few bytes per read here, so every part boundary falls between reads somewhere.
    @Test func repeatedFieldsSplitAcrossReadsKeepTheirValues() async throws {
        let served = try Served()
        let values = (0..<40).map { String(repeating: "v", count: $0 % 7) + "\($0)" }
        let sender = """
        import socket, sys, time
        boundary = "XbOuNdArYx"
        parts = [f'--{boundary}\\r\\nContent-Disposition: form-data; name="field[]"\\r\\n\\r\\n{v}\\r\\n' for v in sys.argv[2:]]
        body = ("".join(parts) + f"--{boundary}--\\r\\n").encode()
        head = (f"POST /form HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n"
                f"Content-Type: multipart/form-data; boundary={boundary}\\r\\nContent-Length: {len(body)}\\r\\n\\r\\n").encode()
        s = socket.socket(socket.AF_UNIX)
        s.connect(sys.argv[1])
        s.sendall(head)
        for i in range(0, len(body), 3):
            s.sendall(body[i:i + 3])
            time.sleep(0.0003)
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
        print(reply.decode().split("\\r\\n\\r\\n", 1)[1])
        """
        let run = try await ChildProcess.run("/usr/bin/env", ["python3", "-c", sender, served.socket] + values, in: served.directory)
        await served.stop()
        try #require(run.status == 0, "\(run.stderr)")
        let reply = try JSONDecoder().decode(Echo.Reply.self, from: Data(run.stdout.utf8))
        #expect(reply.fields["field[]"] == values)
    }
}
