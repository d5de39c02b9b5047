import CCurl

/// Response headers of a finished libcurl transfer (`curl_easy_header`), last response only
/// (after redirects).
enum CurlHeader {
    /// Every value of header `name`, in the order received.
    static func values(_ easy: UnsafeMutableRawPointer?, _ name: String) -> [String] {
        var found: [String] = []
        var header: UnsafeMutablePointer<curl_header>?
        var index = 0
        while curl_easy_header(easy, name, index, UInt32(CURLH_HEADER), -1, &header) == CURLHE_OK, let value = header?.pointee {
            found.append(String(cString: value.value))
            index += 1
            if index >= value.amount { break }
        }
        return found
    }

    /// The first value of header `name`, if sent.
    static func first(_ easy: UnsafeMutableRawPointer?, _ name: String) -> String? { values(easy, name).first }
}
