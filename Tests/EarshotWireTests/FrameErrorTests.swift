import EarshotWire
import Testing

/// Small limits so every limit is easy to cross.
let smallLimits = FrameLimits(maxHeaderBytes: 64, maxDataBytes: 32, maxPayloadBytes: 48)

@Suite("Frame errors: every FrameError from a concrete bad input")
struct FrameErrorTests {
    @Test("header longer than the limit, followed by a newline")
    func headerTooLargeWithNewline() {
        let line = #"{"type":""# + String(repeating: "a", count: 54) + #""}"#
        #expect(line.utf8.count == 65)
        #expect(frameError(line + "\n", limits: smallLimits) == .headerTooLarge(limit: 64))
        // Also when the newline arrives in a later chunk than the header's first 65 bytes.
        #expect(decodeStream(Array((line + "\n").utf8), limits: smallLimits) { _ in 3 }.error == .headerTooLarge(limit: 64))
    }

    @Test("header longer than the limit without any newline: detected before the line ends")
    func headerTooLargeWithoutNewline() throws {
        var decoder = FrameDecoder(limits: smallLimits)
        decoder.feed(Array(repeating: UInt8(ascii: "{"), count: 64))
        #expect(try decoder.next() == nil)
        #expect(decoder.bufferedByteCount == 64)
        decoder.feed([UInt8(ascii: " ")])
        #expect(throws: FrameError.headerTooLarge(limit: 64)) { try decoder.next() }
        #expect(decoder.bufferedByteCount == 0)
        // With the default limit, 64 KiB + 1 bytes of garbage are enough.
        #expect(frameError(Array(repeating: 0x20, count: 65_537)) == .headerTooLarge(limit: 65_536))
    }

    @Test("header not UTF-8")
    func headerNotUTF8() {
        #expect(frameError(Array(#"{"type":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8) + [0x0A]) == .headerNotUTF8)
        #expect(frameError([0xFF, 0x0A]) == .headerNotUTF8)
        // A UTF-8-encoded surrogate is not valid UTF-8.
        #expect(frameError(Array(#"{"type":""#.utf8) + [0xED, 0xA0, 0x80] + Array(#""}"#.utf8) + [0x0A]) == .headerNotUTF8)
    }

    @Test("header not JSON")
    func headerNotJSON() {
        #expect(frameError("{type: ping}\n") == .headerNotJSON)
        #expect(frameError("\n") == .headerNotJSON)
        #expect(frameError(#"{"type":"ping"} trailing"# + "\n") == .headerNotJSON)
        #expect(frameError(#"{"type":"ping""# + "\n") == .headerNotJSON)
        // Nesting far beyond any sane depth is rejected, not a stack overflow.
        #expect(frameError(String(repeating: "[", count: 30_000) + String(repeating: "]", count: 30_000) + "\n") == .headerNotJSON)
    }

    @Test("header JSON but not an object")
    func headerNotObject() {
        #expect(frameError("[1]\n") == .headerNotObject)
        #expect(frameError("5\n") == .headerNotObject)
        #expect(frameError("\"ping\"\n") == .headerNotObject)
        #expect(frameError("null\n") == .headerNotObject)
    }

    @Test("missing, empty or non-string type")
    func missingType() {
        #expect(frameError("{}\n") == .missingType)
        #expect(frameError(#"{"data":{"type":"ping"}}"# + "\n") == .missingType)
        #expect(frameError(#"{"type":""}"# + "\n") == .missingType)
        #expect(frameError(#"{"type":5}"# + "\n") == .missingType)
        #expect(frameError(#"{"type":null}"# + "\n") == .missingType)
        #expect(frameError(#"{"type":["ping"]}"# + "\n") == .missingType)
    }

    @Test("invalid length fields: negative, non-integer, string, bool, object", arguments: ["data_length", "payload_length"])
    func invalidLengths(field: String) {
        for value in ["-1", "1.5", "\"5\"", "true", "{}", "[]", "1e300", "-0.5", "9223372036854775808"] {
            let header = #"{"type":"ping","\#(field)":\#(value)}"# + "\n"
            #expect(frameError(header) == .invalidField(field), "\(field) = \(value)")
        }
    }

    @Test("invalid version and non-object inline data")
    func invalidFields() {
        #expect(frameError(#"{"type":"ping","version":1}"# + "\n") == .invalidField("version"))
        #expect(frameError(#"{"type":"ping","version":["1.7.0"]}"# + "\n") == .invalidField("version"))
        for value in ["[1]", "\"text\"", "5", "true"] {
            #expect(frameError(#"{"type":"ping","data":\#(value)}"# + "\n") == .invalidField("data"), "data = \(value)")
        }
    }

    @Test("data and payload lengths over the limits fail from the header alone")
    func overLimits() throws {
        var decoder = FrameDecoder(limits: smallLimits)
        decoder.feed(Array(#"{"type":"t","data_length":33}"#.utf8) + [0x0A])
        #expect(throws: FrameError.dataTooLarge(length: 33, limit: 32)) { try decoder.next() }

        #expect(frameError(#"{"type":"t","payload_length":49}"# + "\n", limits: smallLimits) == .payloadTooLarge(length: 49, limit: 48))
        #expect(frameError(#"{"type":"t","data_length":9223372036854775807}"# + "\n") == .dataTooLarge(length: .max, limit: 1 << 20))
        #expect(frameError(#"{"type":"t","payload_length":4194305}"# + "\n") == .payloadTooLarge(length: 4_194_305, limit: 4 << 20))

        // Exactly at the limits is fine.
        let block = #"{"k":""# + String(repeating: "v", count: 24) + #""}"#
        #expect(block.utf8.count == 32)
        let header = #"{"type":"t","data_length":32,"payload_length":48}"#
        let frame = try decodeOne(Array((header + "\n" + block).utf8) + Array(repeating: 7, count: 48), limits: smallLimits)
        #expect(frame.payload.count == 48)
    }

    @Test("data block not UTF-8")
    func dataNotUTF8() {
        let bytes = Array(#"{"type":"t","data_length":4}"#.utf8) + [0x0A] + [0x7B, 0x22, 0xFE, 0x7D]
        #expect(frameError(bytes) == .dataNotUTF8)
    }

    @Test("data block not a JSON object (or not JSON at all)")
    func dataNotObject() {
        for block in ["[1,2]", "\"s\"", "42", "null", "{oops}", "{\"a\":1", "    "] {
            let bytes = #"{"type":"t","data_length":\#(block.utf8.count)}"# + "\n" + block
            #expect(frameError(bytes) == .dataNotObject, "block \(block)")
        }
    }

    @Test("stream ends inside a frame: finish() reports truncation")
    func truncated() throws {
        // Inside the header line.
        #expect(frameError(#"{"type":"pi"#) == .truncated(bufferedBytes: 11))
        // Right after a complete header that announced data (nothing of the data arrived).
        let header = #"{"type":"t","data_length":7,"payload_length":3}"#
        let headerBytes = header.utf8.count + 1
        #expect(frameError(header + "\n") == .truncated(bufferedBytes: headerBytes))
        // Inside the data block, and inside the payload.
        #expect(frameError(header + "\n" + #"{"a""#) == .truncated(bufferedBytes: headerBytes + 4))
        #expect(frameError(Array((header + "\n" + #"{"a":1}"#).utf8) + [9]) == .truncated(bufferedBytes: headerBytes + 7 + 1))
        // After complete frames there is nothing to report.
        var decoder = FrameDecoder()
        decoder.feed(try Frame(Ping(text: "x")).encoded())
        #expect(try decoder.next() != nil)
        #expect(try decoder.next() == nil)
        #expect(decoder.bufferedByteCount == 0)
        try decoder.finish()
    }

    @Test("bufferedByteCount counts a pending frame's header until the frame is returned")
    func bufferedCountsPendingHeader() throws {
        var decoder = FrameDecoder()
        let bytes = try Frame(AudioChunk(format: AudioFormatFields(rate: 8000, width: 2, channels: 1)), payload: [1, 2, 3, 4]).encoded()
        decoder.feed(bytes.dropLast(2))
        #expect(try decoder.next() == nil)
        #expect(decoder.bufferedByteCount == bytes.count - 2)
        decoder.feed(bytes.suffix(2))
        #expect(try decoder.next()?.payload == [1, 2, 3, 4])
        #expect(decoder.bufferedByteCount == 0)
    }

    @Test("a decoder that threw keeps throwing the same error and ignores further input")
    func errorsAreSticky() throws {
        var decoder = FrameDecoder(limits: smallLimits)
        decoder.feed(try Frame(Ping(text: "ok")).encoded())
        decoder.feed(Array("[1]\n".utf8))
        decoder.feed(try Frame(Ping(text: "after")).encoded())
        #expect(try decoder.next() == Frame(Ping(text: "ok")))
        #expect(throws: FrameError.headerNotObject) { try decoder.next() }
        #expect(decoder.bufferedByteCount == 0)
        decoder.feed(try Frame(Pong()).encoded())
        #expect(decoder.bufferedByteCount == 0)
        #expect(throws: FrameError.headerNotObject) { try decoder.next() }
        #expect(throws: FrameError.headerNotObject) { try decoder.finish() }

        // The helper checks the same for every error above; spot-check it reports no violations.
        let outcome = decodeStream(Array(#"{"type":"t","data_length":-1}"#.utf8) + [0x0A])
        #expect(outcome.error == .invalidField("data_length"))
        #expect(outcome.stickyViolations == 0)
    }

    @Test("every error has a readable description")
    func descriptions() {
        let all: [FrameError] = [
            .headerTooLarge(limit: 64), .headerNotUTF8, .headerNotJSON, .headerNotObject, .missingType,
            .invalidField("data_length"), .dataTooLarge(length: 33, limit: 32), .payloadTooLarge(length: 49, limit: 48),
            .dataNotUTF8, .dataNotObject, .truncated(bufferedBytes: 7),
        ]
        #expect(Set(all.map(\.description)).count == all.count)
        #expect(FrameError.invalidField("data_length").description.contains("data_length"))
        #expect(FrameError.dataTooLarge(length: 33, limit: 32).description.contains("33"))
        #expect(FrameError.truncated(bufferedBytes: 7).description.contains("7"))
    }
}
