import CMicroHTTPD
import Foundation

/// One request on one connection, from its head to its response; lives from the first access
/// callback to libmicrohttpd's completion callback, all on the connection's own thread.
final class Exchange: @unchecked Sendable {
    private unowned let server: HTTPServer
    private let connection: OpaquePointer
    let fd: Int32
    let head: HTTPRequestHead
    private var body = Data()
    private var receivedBytes = 0
    private var postProcessor: OpaquePointer?
    private var form: HTTPForm?
    private var refusal: HTTPRejection?
    private var responded = false
    private let lock = NSLock()
    // Guarded by `lock`.
    private var task: Task<Void, Never>?
    private var cancelled = false

    init(server: HTTPServer, connection: OpaquePointer, fd: Int32, head: HTTPRequestHead) {
        self.server = server
        self.connection = connection
        self.fd = fd
        self.head = head
    }

    /// Marks the request as refused before it starts (the answer goes out at the first callback).
    func refuse(_ reason: HTTPRejection) { refusal = reason }

    /// The first callback: screen the head, check the declared size, set up form parsing.
    func started() -> MHD_Result {
        if let refusal { return reject(refusal) }
        if let response = server.handler.screen(head) { return queue(response) }
        if let declared = head.header("content-length").flatMap(Int.init), declared > server.limits.maxBodyBytes {
            return reject(.bodyTooLarge(limit: server.limits.maxBodyBytes))
        }
        if head.mediaType == "multipart/form-data" || head.mediaType == "application/x-www-form-urlencoded" {
            form = HTTPForm()
            postProcessor = MHD_create_post_processor(connection, 64 << 10, Exchange.formPart, Unmanaged.passUnretained(self).toOpaque())
            if postProcessor == nil { return reject(.malformedForm) }
        }
        return earshot_mhd_yes
    }

    /// A piece of the body. After an early response the rest is discarded unread.
    func received(_ bytes: UnsafeRawBufferPointer) -> MHD_Result {
        if responded { return earshot_mhd_yes }
        receivedBytes += bytes.count
        server.watch.received(fd, bytes: bytes.count)
        if receivedBytes > server.limits.maxBodyBytes {
            // A body with no declared length found too large while reading: read on without
            // keeping it, so the client is still listening when the 413 goes out; a client that
            // goes on for four times the limit is cut off.
            body = Data()
            form = nil
            return receivedBytes > 4 * server.limits.maxBodyBytes ? earshot_mhd_no : earshot_mhd_yes
        }
        if let postProcessor, form != nil {
            let parsed = MHD_post_process(postProcessor, bytes.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count)
            if parsed != earshot_mhd_yes { return reject(.malformedForm) }
        } else {
            body.append(contentsOf: bytes)
        }
        return earshot_mhd_yes
    }

    /// The body is complete: run the handler and queue its response (or close if the client left).
    func finished() -> MHD_Result {
        // The request is in: the client owes nothing more (a body still arriving after an early
        // answer stays under the pace rules until then).
        server.watch.answering(fd)
        if responded { return earshot_mhd_yes }
        if receivedBytes > server.limits.maxBodyBytes { return reject(.bodyTooLarge(limit: server.limits.maxBodyBytes)) }
        if let postProcessor {
            MHD_destroy_post_processor(postProcessor)
            self.postProcessor = nil
        }
        guard let response = waitForHandler(HTTPRequest(head: head, body: body, form: form)) else { return earshot_mhd_no }
        body = Data()
        return queue(response)
    }

    /// Cancels a running handler (server stopping).
    func cancel() {
        lock.withLock {
            cancelled = true
            task?.cancel()
        }
    }

    /// libmicrohttpd is done with the request.
    func close() {
        if let postProcessor { MHD_destroy_post_processor(postProcessor) }
        postProcessor = nil
        cancel()
    }

    /// Whether the client has hung up (or the server is stopping): a waiting request stops waiting.
    func abandoned() -> Bool {
        if server.isStopping { return true }
        guard fd >= 0 else { return false }
        var poller = pollfd(fd: fd, events: earshot_pollrdhup, revents: 0)
        guard poll(&poller, 1, 0) > 0 else { return false }
        return poller.revents & (earshot_pollrdhup | Int16(POLLHUP | POLLERR)) != 0
    }

    private func waitForHandler(_ request: HTTPRequest) -> HTTPResponse? {
        final class Box: @unchecked Sendable { var response: HTTPResponse? }
        let box = Box()
        let done = DispatchSemaphore(value: 0)
        let handler = server.handler
        // This thread is the connection's own (thread-per-connection), so waiting here holds no
        // one else up; the handler runs on the Swift pool.
        let running = Task {
            box.response = await handler.respond(to: request)
            done.signal()
        }
        lock.withLock {
            task = running
            if cancelled { running.cancel() }
        }
        while done.wait(timeout: .now() + .milliseconds(200)) == .timedOut {
            if abandoned() {
                running.cancel()
                return nil
            }
        }
        return box.response
    }

    private func reject(_ reason: HTTPRejection) -> MHD_Result {
        queue(server.handler.rejection(reason, head: head))
    }

    private func queue(_ response: HTTPResponse) -> MHD_Result {
        responded = true
        let made: OpaquePointer?
        switch response.body {
        case .bytes(let data):
            made = data.withUnsafeBytes { bytes in
                MHD_create_response_from_buffer(bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), earshot_mhd_must_copy)
            }
        case .stream(let stream):
            let pump = StreamPump(stream, exchange: self)
            made = MHD_create_response_from_callback(earshot_mhd_size_unknown, 16 << 10, StreamPump.read,
                                                     Unmanaged.passRetained(pump).toOpaque(), StreamPump.release)
        }
        guard let made else { return earshot_mhd_no }
        defer { MHD_destroy_response(made) }
        for header in response.headers { _ = MHD_add_response_header(made, header.name, header.value) }
        return MHD_queue_response(connection, UInt32(response.status), made)
    }

    private static let formPart: MHD_PostDataIterator = { cls, _, key, filename, contentType, _, data, offset, size in
        guard let cls, let key else { return earshot_mhd_no }
        let exchange = Unmanaged<Exchange>.fromOpaque(cls).takeUnretainedValue()
        let bytes = data.map { Data(bytes: $0, count: size) } ?? Data()
        exchange.addFormPart(name: String(cString: key), filename: filename.map { String(cString: $0) },
                             contentType: contentType.map { String(cString: $0) }, offset: offset, bytes: bytes)
        return earshot_mhd_yes
    }

    /// A piece of one form part: libmicrohttpd hands each part over in pieces, `offset` 0 starting a
    /// new one (so repeated names such as `timestamp_granularities[]` keep every value).
    private func addFormPart(name: String, filename: String?, contentType: String?, offset: UInt64, bytes: Data) {
        if let filename {
            if offset == 0 {
                form?.files[name] = HTTPFormFile(filename: filename, contentType: contentType, data: bytes)
            } else {
                form?.files[name]?.data.append(bytes)
            }
            return
        }
        let piece = String(decoding: bytes, as: UTF8.self)
        // libmicrohttpd may announce a part with an empty piece at offset 0 and then deliver its
        // data, again at offset 0 (nothing was delivered before it): that is the same part.
        let continuesEmptyStart = offset == 0 && emptyStart == name
        emptyStart = offset == 0 && bytes.isEmpty ? name : nil
        if offset == 0, !continuesEmptyStart {
            form?.fields[name, default: []].append(piece)
        } else if var values = form?.fields[name], !values.isEmpty {
            values[values.count - 1] += piece
            form?.fields[name] = values
        }
    }

    /// The field whose newest part so far is an empty piece at offset 0.
    private var emptyStart: String?
}
