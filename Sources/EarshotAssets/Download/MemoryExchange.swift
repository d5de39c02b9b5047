import CCurl
import Foundation

/// One HTTP (or `file:`) request whose response is kept in memory: a catalog document, its
/// signature, or a registry's API call.
struct MemoryRequest: Sendable {
    var method = "GET"
    var url: String
    var headers: [String] = []
    /// The request body (`PATCH`, `PUT`, `POST`); nil sends none.
    var body: [UInt8]?
    /// Largest response body kept; a larger one fails the exchange (``MirrorFailure/Reason/tooLarge``).
    var maxResponseBytes: Int = 64 << 10
    /// Protocols the URL may use, and those a redirect (at most five) may switch to.
    var protocols = "http,https"
    var redirectProtocols = "https"
    /// Longest the whole exchange may take; nil: no limit beyond stall detection.
    var totalTimeout: Duration?
    /// The response headers to keep (lower-case names).
    var headerNames: [String] = []
}

/// An answer: status (0 for `file:`), the headers asked for, and the body.
struct MemoryResponse: Sendable {
    var status: Int
    /// Values by lower-cased name, for the request's ``MemoryRequest/headerNames``.
    var headers: [String: [String]]
    var body: [UInt8]

    func header(_ name: String) -> String? { headers[name]?.first }
}

/// How one exchange ended.
enum MemoryOutcome: Sendable {
    case response(MemoryResponse)
    /// It could not complete: libcurl's reason, or ``MirrorFailure/Reason/tooLarge``.
    case failure(MirrorFailure.Reason)
}

/// Performs one blocking libcurl exchange: run it on a ``BlockingWork`` thread.
enum MemoryExchange {
    static func perform(_ request: MemoryRequest, options: DownloadOptions, userAgent: String) -> MemoryOutcome {
        CurlGlobal.ensureInitialized()
        guard let easy = curl_easy_init() else { return .failure(MirrorFailure.Reason.curl(code: Int(CURLE_FAILED_INIT.rawValue), message: "curl_easy_init failed")) }
        defer { curl_easy_cleanup(easy) }
        let sink = BoundedBody(limit: request.maxResponseBytes)
        var headers: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(headers) }
        for header in request.headers { headers = curl_slist_append(headers, header) }
        // No "Expect: 100-continue" round trip before a body.
        headers = curl_slist_append(headers, "Expect:")
        var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        let context = Unmanaged.passUnretained(sink).toOpaque()
        _ = CCurl_easy_setopt_string(easy, CURLOPT_URL, request.url)
        _ = CCurl_easy_setopt_string(easy, CURLOPT_PROTOCOLS_STR, request.protocols)
        _ = CCurl_easy_setopt_string(easy, CURLOPT_REDIR_PROTOCOLS_STR, request.redirectProtocols)
        _ = CCurl_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 1)
        _ = CCurl_easy_setopt_long(easy, CURLOPT_MAXREDIRS, 5)
        _ = CCurl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        _ = CCurl_easy_setopt_string(easy, CURLOPT_USERAGENT, userAgent)
        _ = CCurl_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(options.connectTimeout.components.seconds * 1000))
        _ = CCurl_easy_setopt_long(easy, CURLOPT_LOW_SPEED_LIMIT, options.lowSpeedLimit)
        _ = CCurl_easy_setopt_long(easy, CURLOPT_LOW_SPEED_TIME, max(1, Int(options.lowSpeedTime.components.seconds)))
        if let timeout = request.totalTimeout { _ = CCurl_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, Int(timeout.components.seconds * 1000)) }
        _ = CCurl_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, headers)
        if let caFile = options.caFile { _ = CCurl_easy_setopt_string(easy, CURLOPT_CAINFO, caFile) }
        _ = CCurl_easy_setopt_write(easy, CURLOPT_WRITEFUNCTION, BoundedBody.write)
        _ = CCurl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, context)
        switch request.method {
        case "GET": break
        case "HEAD": _ = CCurl_easy_setopt_long(easy, CURLOPT_NOBODY, 1)
        default: _ = CCurl_easy_setopt_string(easy, CURLOPT_CUSTOMREQUEST, request.method)
        }
        let body = request.body ?? []
        let code = body.withUnsafeBufferPointer { bytes in
            errorBuffer.withUnsafeMutableBufferPointer { buffer in
                if request.body != nil {
                    _ = CCurl_easy_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bytes.count))
                    _ = CCurl_easy_setopt_pointer(easy, CURLOPT_POSTFIELDS, UnsafeMutableRawPointer(mutating: bytes.baseAddress ?? UnsafePointer(bitPattern: 1)!))
                }
                _ = CCurl_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, buffer.baseAddress)
                return curl_easy_perform(easy)
            }
        }
        if sink.overflow { return .failure(MirrorFailure.Reason.tooLarge) }
        guard code == CURLE_OK else {
            // curl's own reason ("Failed to connect to … : Connection refused", "Could not resolve host: …").
            let detail = errorBuffer[0] != 0 ? errorBuffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } : String(cString: curl_easy_strerror(code))
            return .failure(MirrorFailure.Reason.curl(code: Int(code.rawValue), message: detail))
        }
        var status = 0
        _ = CCurl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        var found: [String: [String]] = [:]
        for name in request.headerNames {
            let values = CurlHeader.values(easy, name)
            if !values.isEmpty { found[name] = values }
        }
        return .response(MemoryResponse(status: status, headers: found, body: sink.bytes))
    }
}

/// A response body collected in memory up to a limit, for libcurl's write callback (used on the
/// transfer's thread only). A body past the limit aborts the transfer and sets ``overflow``.
private final class BoundedBody {
    let limit: Int
    private(set) var bytes: [UInt8] = []
    private(set) var overflow = false

    init(limit: Int) { self.limit = limit }

    /// Appends `chunk`; false (abort) when it would pass the limit.
    func receive(_ chunk: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count + chunk.count <= limit else {
            overflow = true
            return false
        }
        bytes.append(contentsOf: chunk)
        return true
    }

    /// `CURLOPT_WRITEFUNCTION` for a `BoundedBody` passed as `CURLOPT_WRITEDATA`.
    static let write: curl_write_callback = { data, size, count, context in
        let body = Unmanaged<BoundedBody>.fromOpaque(context!).takeUnretainedValue()
        let length = size * count
        return body.receive(UnsafeRawBufferPointer(start: data, count: length)) ? length : 0
    }
}
