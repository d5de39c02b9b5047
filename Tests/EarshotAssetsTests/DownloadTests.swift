import EarshotAssets
import EarshotSystem
import EarshotWire
import Foundation
import Testing
import TestSupport

let mib = 1 << 20

/// A cache directory and destination for one test, plus helpers to look at what landed there.
struct DownloadFixture {
    let directory: TempDirectory
    var destination: String { directory.file("model.part") }
    var metadataPath: String { destination + ".meta" }

    init() throws { directory = try TempDirectory("dl") }

    func request(_ urls: [String], expectedSize: Int? = nil, options: DownloadOptions = .testing) -> DownloadRequest {
        DownloadRequest(urls: urls, destination: destination, expectedSize: expectedSize.map(Int64.init), options: options)
    }

    var contents: [UInt8]? { FileManager.default.contents(atPath: destination).map { Array($0) } }
    var size: Int? { (try? FileManager.default.attributesOfItem(atPath: destination)[.size] as? Int) ?? nil }

    /// The sidecar as JSON, nil when absent.
    var metadata: [String: Any]? {
        guard let data = FileManager.default.contents(atPath: metadataPath) else { return nil }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
    }
}

extension DownloadOptions {
    /// Short backoff and timeouts so failure tests stay quick.
    static var testing: DownloadOptions {
        DownloadOptions(maxAttemptsPerMirror: 3, backoffBase: .milliseconds(100), connectTimeout: .seconds(5), lowSpeedTime: .seconds(10))
    }
}

/// Progress reports from the transfer thread, and a latch the test can wait on.
final class ProgressRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private var reports: [DownloadProgress] = []
    private var stopAt: Int64?

    /// Opened once `stopAt` bytes are done: the download's cancellation.
    let cancellation = Latch()

    /// A recorder that cancels the download once `bytes` are done.
    init(cancelAt bytes: Int? = nil) { stopAt = bytes.map(Int64.init) }

    func record(_ progress: DownloadProgress) {
        let reached = lock.withLock {
            reports.append(progress)
            return stopAt.map { progress.bytesDone >= $0 } ?? false
        }
        if reached { cancellation.open() }
    }
    var last: DownloadProgress? { lock.withLock { reports.last } }
    var count: Int { lock.withLock { reports.count } }

    /// Waits until `bytes` are done; false after `timeout`.
    func wait(for bytes: Int, timeout: Duration = .seconds(10)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if (last?.bytesDone ?? 0) >= Int64(bytes) { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return false
    }
}

@Suite("Downloads from a real nginx")
struct DownloadTests {
    let downloader = Downloader()

    @Test("a plain download lands byte for byte, with User-Agent, sidecar and progress")
    func plainDownload() async throws {
        let server = try await NginxServer.start()
        let fixture = try DownloadFixture()
        defer { fixture.directory.remove() }
        let data = NginxServer.seededBytes(count: 12 * mib, seed: 1)
        let url = try server.put("files/model.bin", data)
        let progress = ProgressRecorder()

        let result = try await downloader.download(fixture.request([url], expectedSize: data.count), progress: progress.record)

        #expect(result.bytes == Int64(data.count))
        #expect(result.url == url)
        #expect(result.resumedFrom == 0)
        #expect(result.bytesTransferred == Int64(data.count))
        #expect(result.etag != nil)
        #expect(fixture.contents == data)
        #expect(progress.last == DownloadProgress(bytesDone: Int64(data.count), bytesTotal: Int64(data.count)))
        let metadata = try #require(fixture.metadata)
        #expect(metadata["url"] as? String == url)
        #expect(metadata["etag"] as? String == result.etag)
        #expect(metadata["total_size"] as? Int == data.count)
        #expect(metadata["last_modified"] is String)
        let log = await server.accessLog(atLeast: 1)
        #expect(log.count == 1)
        #expect(log.first?.request == "GET /files/model.bin HTTP/1.1")
        #expect(log.first?.status == 200)
        #expect(log.first?.bodyBytesSent == Int64(data.count))
        #expect(log.first?.range == nil)
        #expect(log.first?.userAgent == "earshotd/\(EarshotVersion.string)")
    }

    @Test("a complete file costs one request answered 416 and is reported complete")
    func completeFileAnswers416() async throws {
        let server = try await NginxServer.start()
        let fixture = try DownloadFixture()
        defer { fixture.directory.remove() }
        let data = NginxServer.seededBytes(count: 5 * mib, seed: 2)
        let url = try server.put("files/model.bin", data)
        let first = try await downloader.download(fixture.request([url], expectedSize: data.count))

        let again = try await downloader.download(fixture.request([url], expectedSize: data.count))

        #expect(again.bytes == Int64(data.count))
        #expect(again.resumedFrom == Int64(data.count))
        #expect(again.bytesTransferred == 0)
        #expect(again.etag == first.etag)
        #expect(fixture.contents == data)
        let log = await server.accessLog(atLeast: 2)
        #expect(log.map(\.status) == [200, 416])
        #expect(log.last?.range == "bytes=\(data.count)-")
        #expect(log.last?.ifRange == first.etag)
    }

    @Test("a transfer cut by killing the nginx worker resumes with a range and re-fetches < 1 MiB")
    func resumeAfterWorkerKilled() async throws {
        let server = try await NginxServer.start(.init(rateLimit: "4m"))
        let fixture = try DownloadFixture()
        defer { fixture.directory.remove() }
        let data = NginxServer.seededBytes(count: 8 * mib, seed: 3)
        let url = try server.put("files/model.bin", data)
        let progress = ProgressRecorder()
        let request = fixture.request([url], expectedSize: data.count)
        let downloader = self.downloader

        async let download = downloader.download(request, progress: progress.record)
        #expect(await progress.wait(for: 2 * mib))
        let cutAt = progress.last?.bytesDone ?? 0
        await server.killWorkers()
        let result = try await download

        #expect(fixture.contents == data)
        #expect(result.resumedFrom >= cutAt)
        #expect(result.resumedFrom < Int64(data.count))
        // The killed request never reaches the log; the retry does.
        let log = await server.accessLog(atLeast: 1)
        let resumed = try #require(log.last)
        #expect(resumed.range == "bytes=\(result.resumedFrom)-")
        #expect(resumed.ifRange == result.etag)
        #expect(resumed.status == 206)
        #expect(resumed.bodyBytesSent == Int64(data.count) - result.resumedFrom)
        let remainingAtCut = Int64(data.count) - cutAt
        #expect(resumed.bodyBytesSent < remainingAtCut + Int64(mib))
    }

    @Test("cancelling keeps the partial and its sidecar; the next call resumes with If-Range")
    func cancelKeepsPartialAndResumes() async throws {
        let server = try await NginxServer.start(.init(rateLimit: "4m"))
        let fixture = try DownloadFixture()
        defer { fixture.directory.remove() }
        let data = NginxServer.seededBytes(count: 8 * mib, seed: 4)
        let url = try server.put("files/model.bin", data)
        let progress = ProgressRecorder(cancelAt: 2 * mib)

        await #expect(throws: DownloadError.cancelled) {
            try await downloader.download(fixture.request([url], expectedSize: data.count), progress: progress.record,
                                          cancellation: progress.cancellation)
        }
        let kept = try #require(fixture.size)
        #expect(kept >= 2 * mib && kept < data.count)
        #expect(fixture.contents.map { Array(data.prefix($0.count)) == $0 } == true)
        let etag = try #require(fixture.metadata?["etag"] as? String)

        let result = try await downloader.download(fixture.request([url], expectedSize: data.count))

        #expect(result.resumedFrom == Int64(kept))
        #expect(result.bytesTransferred == Int64(data.count - kept))
        #expect(fixture.contents == data)
        let log = await server.accessLog(atLeast: 2)
        #expect(log.count == 2)
        #expect(log.last?.range == "bytes=\(kept)-")
        #expect(log.last?.ifRange == etag)
        #expect(log.last?.status == 206)
        #expect(log.last?.bodyBytesSent == Int64(data.count - kept))
    }

    @Test("cancelling the Swift task stops the transfer and keeps the partial")
    func taskCancellationKeepsPartial() async throws {
        let server = try await NginxServer.start(.init(rateLimit: "4m"))
        let fixture = try DownloadFixture()
        defer { fixture.directory.remove() }
        let data = NginxServer.seededBytes(count: 8 * mib, seed: 5)
        let url = try server.put("files/model.bin", data)
        let progress = ProgressRecorder()
        let request = fixture.request([url], expectedSize: data.count)
        let downloader = self.downloader

        let task = Task { try await downloader.download(request, progress: progress.record) }
        #expect(await progress.wait(for: mib))
        let started = ContinuousClock.now
        task.cancel()
        await #expect(throws: DownloadError.cancelled) { try await task.value }
        #expect(ContinuousClock.now - started < .seconds(2))
        let kept = try #require(fixture.size)
        #expect(kept >= mib && kept < data.count)
        #expect(fixture.metadata != nil)

        let result = try await downloader.download(request)
        #expect(result.resumedFrom == Int64(kept))
        #expect(fixture.contents == data)
    }

    @Test("when the file changed on the server, If-Range gets a 200 and the download starts over")
    func changedFileRestarts() async throws {
        let server = try await NginxServer.start(.init(rateLimit: "8m"))
        let fixture = try DownloadFixture()
        defer { fixture.directory.remove() }
        let old = NginxServer.seededBytes(count: 8 * mib, seed: 6)
        let url = try server.put("files/model.bin", old, modified: Date(timeIntervalSince1970: 1_600_000_000))
        let progress = ProgressRecorder(cancelAt: 2 * mib)
        await #expect(throws: DownloadError.cancelled) {
            try await downloader.download(fixture.request([url]), progress: progress.record, cancellation: progress.cancellation)
        }
        let kept = try #require(fixture.size)
        let oldETag = try #require(fixture.metadata?["etag"] as? String)

        let new = NginxServer.seededBytes(count: 9 * mib, seed: 7)
        try server.put("files/model.bin", new, modified: Date(timeIntervalSince1970: 1_700_000_000))
        let result = try await downloader.download(fixture.request([url]))

        #expect(result.resumedFrom == 0)
        #expect(result.bytes == Int64(new.count))
        #expect(result.etag != oldETag)
        #expect(fixture.contents == new)
        #expect(fixture.metadata?["etag"] as? String == result.etag)
        let log = await server.accessLog(atLeast: 2)
        #expect(log.last?.range == "bytes=\(kept)-")
        #expect(log.last?.ifRange == oldETag)
        #expect(log.last?.status == 200)
        #expect(log.last?.bodyBytesSent == Int64(new.count))
    }

    @Test("a second download into a destination that is being written is refused, not interleaved")
    func concurrentDownloadOfOneDestinationIsRefused() async throws {
        let server = try await NginxServer.start(.init(rateLimit: "4m"))
        let fixture = try DownloadFixture()
        defer { fixture.directory.remove() }
        let data = NginxServer.seededBytes(count: 6 * mib, seed: 8)
        let url = try server.put("files/model.bin", data)
        let progress = ProgressRecorder()
        let request = fixture.request([url], expectedSize: data.count)
        let downloader = self.downloader

        async let first = downloader.download(request, progress: progress.record)
        #expect(await progress.wait(for: mib))
        let error = await #expect(throws: DownloadError.self) { try await downloader.download(request) }
        guard case .io(let failure) = error else {
            Issue.record("expected an I/O error, got \(String(describing: error))")
            return
        }
        #expect(failure.errno == EWOULDBLOCK)
        #expect(failure.function.hasPrefix("flock"))
        let result = try await first
        #expect(result.bytes == Int64(data.count))
        #expect(fixture.contents == data)
    }
}
