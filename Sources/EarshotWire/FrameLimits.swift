/// Hard size limits a ``FrameDecoder`` enforces before buffering anything.
public struct FrameLimits: Sendable, Hashable, Codable {
    /// Longest header line in bytes, newline excluded.
    public var maxHeaderBytes: Int
    /// Largest data block in bytes.
    public var maxDataBytes: Int
    /// Largest binary payload in bytes.
    public var maxPayloadBytes: Int

    public init(maxHeaderBytes: Int = 64 << 10, maxDataBytes: Int = 1 << 20, maxPayloadBytes: Int = 4 << 20) {
        self.maxHeaderBytes = maxHeaderBytes
        self.maxDataBytes = maxDataBytes
        self.maxPayloadBytes = maxPayloadBytes
    }

    /// The defaults the daemon uses unless configured otherwise.
    public static let `default` = FrameLimits()

    enum CodingKeys: String, CodingKey {
        case maxHeaderBytes = "max_header_bytes"
        case maxDataBytes = "max_data_bytes"
        case maxPayloadBytes = "max_payload_bytes"
    }
}
