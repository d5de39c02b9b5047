import CCurl

/// A response body collected in memory up to a limit, for libcurl's write callback (used on the
/// transfer's thread only). A body past the limit aborts the transfer and sets ``overflow``.
final class BoundedBody {
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
