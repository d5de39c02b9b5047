/// Why a byte stream is not a valid sequence of frames. Every case is final for the stream:
/// a decoder that threw keeps throwing the same error.
public enum FrameError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The header line is longer than the limit (or no newline came within it).
    case headerTooLarge(limit: Int)
    /// The header line is not valid UTF-8.
    case headerNotUTF8
    /// The header line is not valid JSON.
    case headerNotJSON
    /// The header is JSON but not an object.
    case headerNotObject
    /// The header has no non-empty string `type`.
    case missingType
    /// A header field has the wrong type or an impossible value (negative length, non-object data).
    case invalidField(String)
    /// `data_length` is above the limit.
    case dataTooLarge(length: Int64, limit: Int)
    /// `payload_length` is above the limit.
    case payloadTooLarge(length: Int64, limit: Int)
    /// The data block is not valid UTF-8.
    case dataNotUTF8
    /// The data block is not a JSON object.
    case dataNotObject
    /// The stream ended inside a frame.
    case truncated(bufferedBytes: Int)

    public var description: String {
        switch self {
        case .headerTooLarge(let limit): "header line longer than \(limit) bytes"
        case .headerNotUTF8: "header line is not valid UTF-8"
        case .headerNotJSON: "header line is not valid JSON"
        case .headerNotObject: "header line is not a JSON object"
        case .missingType: "header has no event type"
        case .invalidField(let name): "header field '\(name)' is invalid"
        case .dataTooLarge(let length, let limit): "data_length \(length) exceeds the limit of \(limit) bytes"
        case .payloadTooLarge(let length, let limit): "payload_length \(length) exceeds the limit of \(limit) bytes"
        case .dataNotUTF8: "data block is not valid UTF-8"
        case .dataNotObject: "data block is not a JSON object"
        case .truncated(let n): "stream ended inside a frame (\(n) bytes buffered)"
        }
    }
}
