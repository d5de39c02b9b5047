import EarshotAssets
import Foundation
import Testing
import TestSupport

@Suite("Download mirror failover, retries and TLS")
struct DownloadFailoverTests {
    let downloader = Downloader()

    @Test("404 and 410 move to the next mirror at once, without retries")
    func notFoundAndGoneFailOverAtOnce() async throws {
        let server = try await NginxServer.start(.init(routes: [.init(prefix: "/gone/", status: 410)]))
        let fixture = try DownloadFixture()
        defer { fixture.directory.remove() }
        let data = NginxServer.seededBytes(count: 5 * mib, seed: 10)
        let good = try server.put("files/model.bin", data)
        let mirrors = [server.url("missing/model.bin"), server.url("gone/model.bin"), good]

        let result = try await downloader.download(fixture.request(mirrors, expectedSize: data.count))

        #expect(result.url == good)
        #expect(fixture.contents == data)
        let log = await server.accessLog(atLeast: 3)
        #expect(log.map(\.status) == [404, 410, 200])
        #expect(log.map(\.path) == ["/missing/model.bin", "/gone/model.bin", "/files/model.bin"])
    }

    @Test("5xx is retried with doubling backoff up to maxAttemptsPerMirror, then the next mirror serves")
    func serverErrorsRetriedWithBackoffThenFailover() async throws {
        let server = try await NginxServer.start(.init(routes: [.init(prefix: "/broken/", status: 500)]))
        let fixture = try DownloadFixture()
        defer { fixture.directory.remove() }
        let data = NginxServer.seededBytes(count: 5 * mib, seed: 11)
        let good = try server.put("files/model.bin", data)
        var options = DownloadOptions.testing
        options.maxAttemptsPerMirror = 3
        options.backoffBase = .milliseconds(200)
        #expect(options.backoff(afterAttempt: 1) == .milliseconds(200))
        #expect(options.backoff(afterAttempt: 2) == .milliseconds(400))

        let clock = ManualClock()
        let downloader = Downloader(clock: clock)
        let request = fixture.request([server.url("broken/model.bin"), good], options: options)
        let download = Task { try await downloader.download(request) }
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .milliseconds(200))
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .milliseconds(400))
        let result = try await download.value

        #expect(result.url == good)
        #expect(fixture.contents == data)
        #expect(clock.requestedSleeps == [.milliseconds(200), .milliseconds(400)], "backoff waits 200 ms then 400 ms between the three attempts")
        let log = await server.accessLog(atLeast: 4)
        #expect(log.map(\.status) == [500, 500, 500, 200])
    }

    /// Backoff followed real time whatever clock was injected (catalog fetches slept with
    /// `Task.sleep`); every wait now follows the injected clock.
    @Test("backoff waits follow the injected clock: no attempt before the clock reaches it")
    func backoffWaitsFollowTheManualClock() async throws {
        let server = try await NginxServer.start(.init(routes: [.init(prefix: "/broken/", status: 503)]))
        var options = DownloadOptions.testing
        options.maxAttemptsPerMirror = 3
        options.backoffBase = .seconds(3600)
        options.backoffCap = .seconds(7200)
        let clock = ManualClock()
        let downloader = Downloader(clock: clock)
        let url = server.url("broken/catalog.json")
        let fetch = Task { try await downloader.fetch(url: url, etag: nil, lastModified: nil, maxBytes: 1 << 20, options: options) }
        await clock.sleepers(atLeast: 1)
        #expect(clock.requestedSleeps == [.seconds(3600)], "an hour's backoff on the manual clock, not in real time")
        #expect(await server.accessLog(atLeast: 1).count == 1, "no second attempt before the clock moves")
        clock.advance(by: .seconds(3600))
        await clock.sleepers(atLeast: 1)
        #expect(clock.requestedSleeps == [.seconds(3600), .seconds(7200)])
        #expect(await server.accessLog(atLeast: 2).count == 2)
        clock.advance(by: .seconds(7200))
        let error = await #expect(throws: DownloadError.self) { try await fetch.value }
        guard case .allMirrorsFailed(let failures) = error else {
            Issue.record("expected allMirrorsFailed, got \(String(describing: error))")
            return
        }
        #expect(failures.map(\.attempts) == [3])
        #expect(await server.accessLog(atLeast: 3).map(\.status) == [503, 503, 503])
    }

    @Test("when every mirror fails the error lists each with its last reason and attempt count")
    func allMirrorsFailedListsEach() async throws {
        let server = try await NginxServer.start(.init(routes: [.init(prefix: "/broken/", status: 503)]))
        let fixture = try DownloadFixture()
        defer { fixture.directory.remove() }
        var options = DownloadOptions.testing
        options.maxAttemptsPerMirror = 2
        options.backoffBase = .milliseconds(20)
        let mirrors = [
            server.url("missing/model.bin"),
            server.url("broken/model.bin"),
            "http://127.0.0.1:1/model.bin", // nothing listens on port 1: connection refused
            "file://\(fixture.directory.path)/absent.bin",
        ]

        let error = await #expect(throws: DownloadError.self) {
            try await downloader.download(fixture.request(mirrors, options: options))
        }

        guard case .allMirrorsFailed(let failures) = error else {
            Issue.record("expected allMirrorsFailed, got \(String(describing: error))")
            return
        }
        #expect(failures.map(\.url) == mirrors)
        #expect(failures.map(\.attempts) == [1, 2, 2, 1])
        #expect(failures[0].reason == .httpStatus(404))
        #expect(failures[1].reason == .httpStatus(503))
        guard case .curl(7, _) = failures[2].reason, case .curl(37, _) = failures[3].reason else {
            Issue.record("expected COULDNT_CONNECT and FILE_COULDNT_READ_FILE, got \(failures)")
            return
        }
        let log = await server.accessLog(atLeast: 3)
        #expect(log.map(\.status) == [404, 503, 503])
    }

    @Test("redirects are followed; the result names the mirror as listed")
    func redirectIsFollowed() async throws {
        let server = try await NginxServer.start(.init(routes: [.init(prefix: "/old/", status: 302, target: "/files/model.bin")]))
        let fixture = try DownloadFixture()
        defer { fixture.directory.remove() }
        let data = NginxServer.seededBytes(count: 5 * mib, seed: 12)
        try server.put("files/model.bin", data)
        let mirror = server.url("old/model.bin")

        let result = try await downloader.download(fixture.request([mirror], expectedSize: data.count))

        #expect(result.url == mirror)
        #expect(fixture.contents == data)
        let log = await server.accessLog(atLeast: 2)
        #expect(log.map(\.status) == [302, 200])
    }

    @Test("HTTPS works with the test CA and fails verification without it")
    func tlsWithTestCA() async throws {
        let server = try await NginxServer.start(.init(tls: true))
        let fixture = try DownloadFixture()
        defer { fixture.directory.remove() }
        let data = NginxServer.seededBytes(count: 5 * mib, seed: 13)
        let url = try server.put("files/model.bin", data)
        #expect(url.hasPrefix("https://127.0.0.1:"))

        let error = await #expect(throws: DownloadError.self) {
            try await downloader.download(fixture.request([url], expectedSize: data.count))
        }
        guard case .allMirrorsFailed(let failures) = error, failures.count == 1,
              case .curl(let code, _) = failures[0].reason else {
            Issue.record("expected one TLS failure, got \(String(describing: error))")
            return
        }
        #expect(code == 60 || code == 77, "PEER_FAILED_VERIFICATION (or no usable CA bundle)")
        #expect(failures[0].attempts == 1, "verification failures are not retried")

        var options = DownloadOptions.testing
        options.caFile = server.caFile
        let result = try await downloader.download(fixture.request([url], expectedSize: data.count, options: options))
        #expect(result.bytes == Int64(data.count))
        #expect(fixture.contents == data)
        let log = await server.accessLog(atLeast: 1)
        #expect(log.map(\.status) == [200])
    }

    @Test("a transfer slower than the low-speed limit for the low-speed time is abandoned as stalled")
    func stalledTransferIsAbandoned() async throws {
        let server = try await NginxServer.start(.init(rateLimit: "4k"))
        let fixture = try DownloadFixture()
        defer { fixture.directory.remove() }
        let url = try server.put("files/model.bin", NginxServer.seededBytes(count: mib, seed: 14))
        var options = DownloadOptions.testing
        options.maxAttemptsPerMirror = 1
        options.lowSpeedLimit = 64 << 10
        options.lowSpeedTime = .seconds(1)

        let started = ContinuousClock.now
        let error = await #expect(throws: DownloadError.self) {
            try await downloader.download(fixture.request([url], options: options))
        }

        #expect(error == .allMirrorsFailed([MirrorFailure(url: url, reason: .stalled, attempts: 1)]))
        #expect(ContinuousClock.now - started < .seconds(5))
        #expect(fixture.metadata != nil, "the partial stays resumable")
    }
}
