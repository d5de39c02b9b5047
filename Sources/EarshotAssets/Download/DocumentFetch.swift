import CCurl
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
        var failures: [MirrorFailure] = []
        for attempt in 1...max(1, options.maxAttemptsPerMirror) {
            let outcome = await BlockingWork.run("earshot.fetch") { [userAgent] in
                DocumentTransfer(url: url, maxBytes: maxBytes, options: options, userAgent: userAgent).perform(etag: etag, lastModified: lastModified)
            }
            switch outcome {
            case .document(let document): return document
            case .failure(let reason):
                failures = [MirrorFailure(url: url, reason: reason, attempts: attempt)]
                guard reason.isTransient, attempt < options.maxAttemptsPerMirror else { throw .allMirrorsFailed(failures) }
                guard await pause(options.backoff(afterAttempt: attempt), cancellation: Latch()) else { throw .cancelled }
            }
        }
        throw .allMirrorsFailed(failures)
    }
}

/// How one fetch attempt ended.
private enum DocumentOutcome: Sendable {
    case document(FetchedDocument)
    case failure(MirrorFailure.Reason)
}

/// One in-memory libcurl transfer (blocking; run on a dedicated thread).
private final class DocumentTransfer {
    let url: String
    let options: DownloadOptions
    let userAgent: String
    let body: BoundedBody

    init(url: String, maxBytes: Int, options: DownloadOptions, userAgent: String) {
        self.url = url
        self.options = options
        self.userAgent = userAgent
        body = BoundedBody(limit: maxBytes)
    }

    func perform(etag: String?, lastModified: String?) -> DocumentOutcome {
        CurlGlobal.ensureInitialized()
        guard let easy = curl_easy_init() else { return .failure(MirrorFailure.Reason.curl(code: Int(CURLE_FAILED_INIT.rawValue), message: "curl_easy_init failed")) }
        defer { curl_easy_cleanup(easy) }
        var headers: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(headers) }
        if let etag { headers = curl_slist_append(headers, "If-None-Match: \(etag)") }
        if let lastModified { headers = curl_slist_append(headers, "If-Modified-Since: \(lastModified)") }
        // curl's own reason ("Failed to connect to … : Connection refused", "Could not resolve host: …").
        var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        let sink = Unmanaged.passUnretained(body).toOpaque()
        _ = CCurl_easy_setopt_string(easy, CURLOPT_URL, url)
        _ = CCurl_easy_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "http,https,file")
        _ = CCurl_easy_setopt_string(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        _ = CCurl_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 1)
        _ = CCurl_easy_setopt_long(easy, CURLOPT_MAXREDIRS, 5)
        _ = CCurl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        _ = CCurl_easy_setopt_string(easy, CURLOPT_USERAGENT, userAgent)
        _ = CCurl_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(options.connectTimeout.components.seconds * 1000))
        _ = CCurl_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, 120_000)
        _ = CCurl_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, headers)
        if let caFile = options.caFile { _ = CCurl_easy_setopt_string(easy, CURLOPT_CAINFO, caFile) }
        _ = CCurl_easy_setopt_write(easy, CURLOPT_WRITEFUNCTION, BoundedBody.write)
        _ = CCurl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, sink)
        let code = errorBuffer.withUnsafeMutableBufferPointer { buffer in
            _ = CCurl_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, buffer.baseAddress)
            return curl_easy_perform(easy)
        }
        if body.overflow { return .failure(MirrorFailure.Reason.tooLarge) }
        guard code == CURLE_OK else {
            let detail = errorBuffer[0] != 0 ? errorBuffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } : String(cString: curl_easy_strerror(code))
            return .failure(MirrorFailure.Reason.curl(code: Int(code.rawValue), message: detail))
        }
        var status = 0
        _ = CCurl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        let isFile = url.lowercased().hasPrefix("file:")
        if status == 304 { return .document(FetchedDocument(notModified: true, body: [], etag: etag, lastModified: lastModified)) }
        guard isFile || (200..<300).contains(status) else { return .failure(MirrorFailure.Reason.httpStatus(status)) }
        return .document(FetchedDocument(notModified: false, body: body.bytes, etag: header(easy, "ETag"), lastModified: header(easy, "Last-Modified")))
    }

    private func header(_ easy: UnsafeMutableRawPointer, _ name: String) -> String? {
        var found: UnsafeMutablePointer<curl_header>?
        guard curl_easy_header(easy, name, 0, UInt32(CURLH_HEADER), -1, &found) == CURLHE_OK, let value = found?.pointee.value else { return nil }
        return String(cString: value)
    }
}
