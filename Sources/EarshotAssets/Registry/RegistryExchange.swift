import CCurl
import Foundation

/// One HTTP request to a registry (or its token realm).
struct RegistryRequest: Sendable {
    var method: String
    var url: String
    var headers: [String] = []
    /// The request body (`PATCH`, `PUT`, `POST`); nil sends none.
    var body: [UInt8]?
    /// Largest response body kept; a larger one fails the exchange.
    var maxResponseBytes: Int = 64 << 10
    /// Redirects are followed (at most five) with these protocols.
    var redirectProtocols = "https"
}

/// A registry's answer: status, the headers the client reads, and the body.
struct RegistryResponse: Sendable {
    var status: Int
    /// Values by lower-cased name, for the headers in ``RegistryExchange/headerNames``.
    var headers: [String: [String]]
    var body: [UInt8]

    func header(_ name: String) -> String? { headers[name]?.first }
}

/// Performs one blocking libcurl exchange: run it on a ``BlockingWork`` thread.
enum RegistryExchange {
    /// The response headers a registry client reads.
    static let headerNames = ["www-authenticate", "docker-content-digest", "location", "range", "content-type", "content-length", "etag"]

    static func perform(_ request: RegistryRequest, options: DownloadOptions, userAgent: String) -> Result<RegistryResponse, RegistryError> {
        CurlGlobal.ensureInitialized()
        guard let easy = curl_easy_init() else { return .failure(.transport(url: request.url, .curl(code: Int(CURLE_FAILED_INIT.rawValue), message: "curl_easy_init failed"))) }
        defer { curl_easy_cleanup(easy) }
        let sink = BoundedBody(limit: request.maxResponseBytes)
        var headers: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(headers) }
        for header in request.headers { headers = curl_slist_append(headers, header) }
        // No "Expect: 100-continue" round trip before chunk uploads.
        headers = curl_slist_append(headers, "Expect:")
        var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        let context = Unmanaged.passUnretained(sink).toOpaque()
        _ = CCurl_easy_setopt_string(easy, CURLOPT_URL, request.url)
        _ = CCurl_easy_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        _ = CCurl_easy_setopt_string(easy, CURLOPT_REDIR_PROTOCOLS_STR, request.redirectProtocols)
        _ = CCurl_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 1)
        _ = CCurl_easy_setopt_long(easy, CURLOPT_MAXREDIRS, 5)
        _ = CCurl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        _ = CCurl_easy_setopt_string(easy, CURLOPT_USERAGENT, userAgent)
        _ = CCurl_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(options.connectTimeout.components.seconds * 1000))
        _ = CCurl_easy_setopt_long(easy, CURLOPT_LOW_SPEED_LIMIT, options.lowSpeedLimit)
        _ = CCurl_easy_setopt_long(easy, CURLOPT_LOW_SPEED_TIME, max(1, Int(options.lowSpeedTime.components.seconds)))
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
        if sink.overflow {
            return .failure(.mismatch("\(request.url) sent more than \(request.maxResponseBytes) bytes"))
        }
        guard code == CURLE_OK else {
            let detail = errorBuffer[0] != 0 ? errorBuffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } : String(cString: curl_easy_strerror(code))
            return .failure(.transport(url: request.url, .curl(code: Int(code.rawValue), message: detail)))
        }
        var status = 0
        _ = CCurl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        var found: [String: [String]] = [:]
        for name in headerNames {
            var header: UnsafeMutablePointer<curl_header>?
            var index = 0
            while curl_easy_header(easy, name, index, UInt32(CURLH_HEADER), -1, &header) == CURLHE_OK, let value = header?.pointee {
                found[name, default: []].append(String(cString: value.value))
                index += 1
                if index >= value.amount { break }
            }
        }
        return .success(RegistryResponse(status: status, headers: found, body: sink.bytes))
    }
}
