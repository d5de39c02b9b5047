import EarshotSystem
import Foundation

/// A small document (a catalog or its signature) fetched into memory with a conditional GET.
public struct FetchedDocument: Sendable, Hashable {
    /// The server answered 304: the copy we have (matching `etag`/`lastModified`) is current.
    public var notModified: Bool
    public var body: [UInt8]
    public var etag: String?
    public var lastModified: String?
}

extension Downloader {
    /// Fetches `url` into memory (at most `maxBytes`), sending `If-None-Match`/`If-Modified-Since`
    /// for the validators of the copy we have. One attempt per try, retried like downloads.
    public func fetch(url: String, etag: String?, lastModified: String?, maxBytes: Int, options: DownloadOptions) async throws(DownloadError) -> FetchedDocument {
        var request = MemoryRequest(url: url, maxResponseBytes: maxBytes, protocols: "http,https,file", redirectProtocols: "http,https",
                                    totalTimeout: .seconds(120), headerNames: ["etag", "last-modified"])
        if let etag { request.headers.append("If-None-Match: \(etag)") }
        if let lastModified { request.headers.append("If-Modified-Since: \(lastModified)") }
        var failures: [MirrorFailure] = []
        for attempt in 1...max(1, options.maxAttemptsPerMirror) {
            let outcome = await BlockingWork.run("earshot.fetch") { [userAgent, request] in
                MemoryExchange.perform(request, options: options, userAgent: userAgent)
            }
            let reason: MirrorFailure.Reason
            switch outcome {
            case .response(let response) where response.status == 304:
                return FetchedDocument(notModified: true, body: [], etag: etag, lastModified: lastModified)
            case .response(let response) where url.lowercased().hasPrefix("file:") || (200..<300).contains(response.status):
                return FetchedDocument(notModified: false, body: response.body, etag: response.header("etag"), lastModified: response.header("last-modified"))
            case .response(let response):
                reason = .httpStatus(response.status)
            case .failure(let failure):
                reason = failure
            }
            failures = [MirrorFailure(url: url, reason: reason, attempts: attempt)]
            guard reason.isTransient, attempt < options.maxAttemptsPerMirror else { throw .allMirrorsFailed(failures) }
            guard await pause(options.backoff(afterAttempt: attempt), cancellation: Latch()) else { throw .cancelled }
        }
        throw .allMirrorsFailed(failures)
    }
}
