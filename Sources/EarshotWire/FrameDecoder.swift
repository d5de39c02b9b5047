/// Incremental frame decoder: feed it byte chunks split anywhere, take complete frames out.
///
/// Limits are checked from the header before any data or payload is buffered, so a hostile peer
/// cannot make the decoder hold more than `maxHeaderBytes + maxDataBytes + maxPayloadBytes`.
public struct FrameDecoder: Sendable {
    private struct Pending: Sendable {
        var type: String
        var version: String?
        var inlineData: [String: JSONValue]
        var dataLength: Int
        var payloadLength: Int
        /// Bytes of the header line, newline included: received but not yet returned as a frame.
        var headerLength: Int
    }

    public let limits: FrameLimits
    private var buffer: [UInt8] = []
    private var start = 0
    private var scanned = 0
    private var pending: Pending?
    private var failure: FrameError?

    public init(limits: FrameLimits = .default) {
        self.limits = limits
    }

    /// Bytes received but not yet returned as frames (a pending frame's header line included).
    public var bufferedByteCount: Int { buffer.count - start + (pending?.headerLength ?? 0) }

    /// Appends received bytes.
    public mutating func feed(_ bytes: some Sequence<UInt8>) {
        guard failure == nil else { return }
        buffer.append(contentsOf: bytes)
    }

    /// Returns the next complete frame, `nil` when more bytes are needed.
    public mutating func next() throws(FrameError) -> Frame? {
        if let failure { throw failure }
        do {
            return try decodeNext()
        } catch {
            failure = error
            buffer = []
            start = 0
            scanned = 0
            pending = nil
            throw error
        }
    }

    /// Call at end of stream: throws ``FrameError/truncated(bufferedBytes:)`` if a frame was cut off.
    public func finish() throws(FrameError) {
        if let failure { throw failure }
        if bufferedByteCount > 0 { throw .truncated(bufferedBytes: bufferedByteCount) }
    }

    private mutating func decodeNext() throws(FrameError) -> Frame? {
        if pending == nil {
            guard let newline = findNewline() else {
                if buffer.count - start > limits.maxHeaderBytes { throw .headerTooLarge(limit: limits.maxHeaderBytes) }
                return nil
            }
            pending = try parseHeader(buffer[start..<newline])
            start = newline + 1
            scanned = start
        }
        guard let p = pending else { return nil }
        guard buffer.count - start >= p.dataLength + p.payloadLength else { return nil }
        var data = p.inlineData
        if p.dataLength > 0 {
            let block = buffer[start..<(start + p.dataLength)]
            guard String(validating: block, as: UTF8.self) != nil else { throw .dataNotUTF8 }
            guard let object = try? WireJSON.decodeObject(block) else { throw .dataNotObject }
            data.merge(object) { _, new in new }
        }
        let payloadStart = start + p.dataLength
        let payload = Array(buffer[payloadStart..<(payloadStart + p.payloadLength)])
        start = payloadStart + p.payloadLength
        scanned = start
        pending = nil
        compact()
        return Frame(type: p.type, version: p.version, data: data, payload: payload)
    }

    private mutating func findNewline() -> Int? {
        let end = min(buffer.count, start + limits.maxHeaderBytes + 1)
        var i = max(scanned, start)
        while i < end {
            if buffer[i] == 0x0A { return i }
            i += 1
        }
        scanned = i
        return nil
    }

    private mutating func compact() {
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 1 << 20)
            start = 0
            scanned = 0
        } else if start > 1 << 16 && start > buffer.count / 2 {
            buffer.removeFirst(start)
            scanned -= start
            start = 0
        }
    }

    private func parseHeader(_ line: ArraySlice<UInt8>) throws(FrameError) -> Pending {
        guard String(validating: line, as: UTF8.self) != nil else { throw .headerNotUTF8 }
        let header: [String: JSONValue]
        do {
            guard let object = try WireJSON.decodeObject(line) else { throw FrameError.headerNotObject }
            header = object
        } catch let error as FrameError {
            throw error
        } catch {
            throw .headerNotJSON
        }
        guard case .string(let type)? = header["type"], !type.isEmpty else { throw .missingType }
        var version: String?
        switch header["version"] {
        case nil, .null?: version = nil
        case .string(let v)?: version = v
        default: throw .invalidField("version")
        }
        var inline: [String: JSONValue] = [:]
        switch header["data"] {
        case nil, .null?: break
        case .object(let o)?: inline = o
        default: throw .invalidField("data")
        }
        let dataLength = try length(header, "data_length")
        if dataLength > limits.maxDataBytes { throw .dataTooLarge(length: dataLength, limit: limits.maxDataBytes) }
        let payloadLength = try length(header, "payload_length")
        if payloadLength > limits.maxPayloadBytes { throw .payloadTooLarge(length: payloadLength, limit: limits.maxPayloadBytes) }
        return Pending(type: type, version: version, inlineData: inline, dataLength: Int(dataLength), payloadLength: Int(payloadLength), headerLength: line.count + 1)
    }

    private func length(_ header: [String: JSONValue], _ key: String) throws(FrameError) -> Int64 {
        switch header[key] {
        case nil, .null?: return 0
        case let value?:
            guard let n = value.intValue, n >= 0 else { throw .invalidField(key) }
            return n
        }
    }
}
