import EarshotAssets
import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

@Suite("Download size, space and bandwidth limits; file: URLs")
struct DownloadLimitsTests {
    let downloader = Downloader()

    @Test("an expected size beyond the free space fails with insufficientStorage before any request")
    func insufficientStorageBeforeDownloading() async throws {
        let server = try await NginxServer.start()
        let fixture = try DownloadFixture()
        defer { fixture.directory.remove() }
        let url = try server.put("files/model.bin", NginxServer.seededBytes(count: mib, seed: 20))
        var info = statvfs()
        #expect(statvfs(fixture.directory.path, &info) == 0)
        let free = Int64(info.f_bavail) * Int64(info.f_frsize)
        let expected = free + (1 << 30)

        let error = await #expect(throws: DownloadError.self) {
            try await downloader.download(fixture.request([url], expectedSize: Int(expected)))
        }

        guard case .insufficientStorage(let needed, let available) = error else {
            Issue.record("expected insufficientStorage, got \(String(describing: error))")
            return
        }
        #expect(needed == expected)
        #expect(available < needed)
        #expect(abs(available - free) < 256 * Int64(mib))
        #expect(fixture.size == nil, "nothing was created")
        try await Task.sleep(for: .milliseconds(100))
        #expect(server.accessLog().isEmpty, "nothing was requested")
    }

    @Test("a server offering more than the expected size is refused before a byte is kept")
    func tooLargeAborts() async throws {
        let server = try await NginxServer.start()
        let fixture = try DownloadFixture()
        defer { fixture.directory.remove() }
        let url = try server.put("files/model.bin", NginxServer.seededBytes(count: 3 * mib, seed: 21))

        await #expect(throws: DownloadError.tooLarge(limit: Int64(mib))) {
            try await downloader.download(fixture.request([url], expectedSize: mib))
        }

        #expect((fixture.size ?? 0) == 0)
        #expect(fixture.metadata == nil)
        let log = await server.accessLog(atLeast: 1)
        #expect(log.count == 1, "not retried")
    }

    @Test("a mirror offering too many bytes is skipped when another has the right file")
    func tooLargeMirrorFailsOver() async throws {
        let server = try await NginxServer.start()
        let fixture = try DownloadFixture()
        defer { fixture.directory.remove() }
        let data = NginxServer.seededBytes(count: mib, seed: 22)
        let wrong = try server.put("stale/model.bin", NginxServer.seededBytes(count: 2 * mib, seed: 23))
        let good = try server.put("files/model.bin", data)

        let result = try await downloader.download(fixture.request([wrong, good], expectedSize: data.count))

        #expect(result.url == good)
        #expect(fixture.contents == data)
    }

    /// Issue 31: the pacing decisions follow the injected clock: the transfer waits on it until
    /// the bytes received fit the cap, so 4 MiB at 2 MiB/s take 2 s of that clock.
    @Test("a bandwidth cap paces the download on the injected clock")
    func bandwidthCapPacesTheDownloadOnTheClock() async throws {
        let server = try await NginxServer.start()
        let fixture = try DownloadFixture()
        defer { fixture.directory.remove() }
        let data = NginxServer.seededBytes(count: 4 * mib, seed: 24)
        let url = try server.put("files/model.bin", data)
        var options = DownloadOptions.testing
        options.maxBytesPerSecond = 2 * Int64(mib)
        let clock = ManualClock()
        let downloader = Downloader(clock: clock)

        let download = Task { try await downloader.download(fixture.request([url], expectedSize: data.count, options: options)) }
        // Move the clock whenever the transfer waits on it, until the download is done.
        let driver = Task {
            while !Task.isCancelled {
                await clock.sleepers(atLeast: 1)
                clock.advance(by: .milliseconds(100))
            }
        }
        let result = try await download.value
        driver.cancel()
        await driver.value
        #expect(result.bytes == Int64(data.count))
        #expect(fixture.contents == data)
        let waited = clock.elapsed
        // The last byte may arrive up to one 100 ms step before its due time.
        #expect(waited >= .milliseconds(1900) && waited <= .milliseconds(2100), "\(waited) of the clock for 4 MiB at 2 MiB/s")
    }

    @Test("file: URLs download, resume from a partial, and start over when the source changed")
    func fileURLDownloadAndResume() async throws {
        let fixture = try DownloadFixture()
        defer { fixture.directory.remove() }
        let source = fixture.directory.file("source.bin")
        let url = "file://" + source
        let data = NginxServer.seededBytes(count: 6 * mib, seed: 25)
        try Data(data).write(to: URL(fileURLWithPath: source))
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1_600_000_000)], ofItemAtPath: source)

        let first = try await downloader.download(fixture.request([url], expectedSize: data.count))
        #expect(first.bytes == Int64(data.count))
        #expect(first.resumedFrom == 0)
        #expect(fixture.contents == data)
        #expect(fixture.metadata?["total_size"] as? Int == data.count)

        // Cut the copy short, keep the sidecar: the next call fetches only the rest.
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: fixture.destination))
        try handle.truncate(atOffset: UInt64(2 * mib))
        try handle.close()
        let resumed = try await downloader.download(fixture.request([url], expectedSize: data.count))
        #expect(resumed.resumedFrom == Int64(2 * mib))
        #expect(resumed.bytesTransferred == Int64(4 * mib))
        #expect(fixture.contents == data)

        // A different source under the same URL: the old bytes are not kept.
        let changed = NginxServer.seededBytes(count: 7 * mib, seed: 26)
        try Data(changed).write(to: URL(fileURLWithPath: source))
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1_700_000_000)], ofItemAtPath: source)
        let restarted = try await downloader.download(fixture.request([url]))
        #expect(restarted.resumedFrom == 0)
        #expect(restarted.bytes == Int64(changed.count))
        #expect(fixture.contents == changed)

        // A source now shorter than the copy: libcurl refuses the range, the copy starts over.
        let shorter = NginxServer.seededBytes(count: 3 * mib, seed: 27)
        try Data(shorter).write(to: URL(fileURLWithPath: source))
        let shrunk = try await downloader.download(fixture.request([url]))
        #expect(shrunk.resumedFrom == 0)
        #expect(fixture.contents == shorter)
    }
}
