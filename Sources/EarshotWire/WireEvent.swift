import Foundation

/// A typed event: its data block is the Codable encoding of the value.
public protocol WireEvent: Codable, Sendable {
    /// The frame `type` this event travels as.
    static var eventType: String { get }
}

/// A typed event whose data does not match its type's schema.
public struct EventDecodingError: Error, Sendable, CustomStringConvertible {
    /// The event type that failed to decode.
    public var eventType: String
    /// What was wrong, from the JSON decoder.
    public var reason: String
    public var description: String { "invalid '\(eventType)' event: \(reason)" }
}

extension Frame {
    /// A frame carrying `event` as its data and `payload` as its binary payload.
    public init<E: WireEvent>(_ event: E, payload: [UInt8] = []) throws {
        let bytes = try WireJSON.encode(event)
        self.init(type: E.eventType, data: try WireJSON.decodeObject(bytes) ?? [:], payload: payload)
    }

    /// Decodes the frame's data as `E`; the type must match.
    public func decode<E: WireEvent>(_: E.Type) throws(EventDecodingError) -> E {
        guard type == E.eventType else {
            throw EventDecodingError(eventType: E.eventType, reason: "frame has type '\(type)'")
        }
        do {
            return try JSONDecoder().decode(E.self, from: Data(WireJSON.encode(data)))
        } catch let DecodingError.keyNotFound(key, _) {
            throw EventDecodingError(eventType: type, reason: "missing field '\(key.stringValue)'")
        } catch let DecodingError.typeMismatch(_, context), let DecodingError.valueNotFound(_, context) {
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            throw EventDecodingError(eventType: type, reason: "field '\(path)' has the wrong type")
        } catch let DecodingError.dataCorrupted(context) {
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            throw EventDecodingError(eventType: type, reason: "field '\(path)': \(context.debugDescription)")
        } catch {
            throw EventDecodingError(eventType: type, reason: "\(error)")
        }
    }

    /// The request correlation id in the data, if any.
    public var requestID: String? { data["id"]?.stringValue }
}
