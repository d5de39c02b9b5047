/// One protocol event on the wire: a JSON header line, an optional JSON data block and an optional
/// binary payload (Wyoming framing, see Docs/PROTOCOL.md).
public struct Frame: Sendable, Hashable {
    /// Event type, e.g. `describe` or `earshot.hello`.
    public var type: String
    /// Protocol version the sender wrote, if any.
    public var version: String?
    /// Event data: the header's inline `data` with the data block merged on top.
    public var data: [String: JSONValue]
    /// Binary payload (PCM audio for audio chunks).
    public var payload: [UInt8]

    public init(type: String, version: String? = WireProtocol.wyomingVersion, data: [String: JSONValue] = [:], payload: [UInt8] = []) {
        self.type = type
        self.version = version
        self.data = data
        self.payload = payload
    }

    /// The frame's bytes: header line, then data block, then payload. Data always goes in the block.
    public func encoded() throws -> [UInt8] {
        var header: [String: JSONValue] = ["type": .string(type)]
        if let version { header["version"] = .string(version) }
        var block: [UInt8] = []
        if !data.isEmpty {
            block = try WireJSON.encode(data)
            header["data_length"] = .int(Int64(block.count))
        }
        if !payload.isEmpty { header["payload_length"] = .int(Int64(payload.count)) }
        var out = try WireJSON.encode(header)
        out.reserveCapacity(out.count + 1 + block.count + payload.count)
        out.append(0x0A)
        out += block
        out += payload
        return out
    }
}

/// Protocol constants.
public enum WireProtocol {
    /// The Wyoming protocol version Earshot's framing is compatible with; written in every header.
    public static let wyomingVersion = "1.7.0"
    /// Earshot's own protocol version, exchanged in `earshot.hello`/`earshot.welcome`.
    public static let earshotVersion = 1
}
