import EarshotWire
import Foundation
import Testing

@Suite("Frame codec: layout, data placement, defaults")
struct FrameCodecTests {
    @Test("writers put data in the block, always send version, omit empty lengths")
    func writerLayout() throws {
        let bytes = try Frame(Ping(text: "hi")).encoded()
        #expect(bytes == Array(#"{"data_length":13,"type":"ping","version":"1.7.0"}"#.utf8) + [0x0A] + Array(#"{"text":"hi"}"#.utf8))

        let bare = try Frame(Describe()).encoded()
        #expect(bare == Array(#"{"type":"describe","version":"1.7.0"}"#.utf8) + [0x0A])

        let chunk = try Frame(AudioChunk(format: AudioFormatFields(rate: 16000, width: 2, channels: 1)), payload: [1, 2, 3, 4]).encoded()
        let header = try headerObject(of: chunk)
        #expect(header["data"] == nil)
        #expect(header["version"] as? String == WireProtocol.wyomingVersion)
        #expect(header["payload_length"] as? Int == 4)
        let block = #"{"channels":1,"rate":16000,"width":2}"#
        #expect(header["data_length"] as? Int == block.utf8.count)
        #expect(Array(chunk.suffix(4)) == [1, 2, 3, 4])
        #expect(Array(chunk.dropLast(4).suffix(block.utf8.count)) == Array(block.utf8))
    }

    @Test("constants: Wyoming version written, Earshot protocol version, default limits")
    func constants() {
        #expect(WireProtocol.wyomingVersion == "1.7.0")
        #expect(WireProtocol.earshotVersion == 1)
        #expect(FrameLimits.default == FrameLimits(maxHeaderBytes: 65_536, maxDataBytes: 1_048_576, maxPayloadBytes: 4_194_304))
    }

    @Test("data inline in the header only")
    func inlineData() throws {
        let frame = try decodeOne(#"{"type":"transcript","version":"1.7.0","data":{"text":"hello","language":"en"}}"# + "\n")
        #expect(frame.type == "transcript")
        #expect(frame.version == "1.7.0")
        #expect(frame.data == ["text": .string("hello"), "language": .string("en")])
        #expect(frame.payload.isEmpty)
        #expect(try frame.decode(Transcript.self) == Transcript(text: "hello", language: "en"))
    }

    @Test("data in an out-of-line block only")
    func blockData() throws {
        let block = #"{"text":"hello"}"#
        let frame = try decodeOne(#"{"type":"transcript","data_length":\#(block.utf8.count)}"# + "\n" + block)
        #expect(frame.data == ["text": .string("hello")])
        #expect(try frame.decode(Transcript.self) == Transcript(text: "hello"))
    }

    @Test("the data block is merged on top of inline data")
    func mergedData() throws {
        let block = #"{"text":"new","extra":[1,2]}"#
        let header = #"{"type":"transcript","data":{"text":"old","language":"de"},"data_length":\#(block.utf8.count),"payload_length":2}"#
        let frame = try decodeOne(Array((header + "\n" + block).utf8) + [0xFF, 0x00])
        #expect(frame.data == ["text": .string("new"), "language": .string("de"), "extra": .array([.int(1), .int(2)])])
        #expect(frame.payload == [0xFF, 0x00])
    }

    @Test("missing version, null version, null lengths and null data are accepted")
    func missingAndNullFields() throws {
        let noVersion = try decodeOne(#"{"type":"ping"}"# + "\n")
        #expect(noVersion == Frame(type: "ping", version: nil))

        let nulls = try decodeOne(#"{"type":"ping","version":null,"data":null,"data_length":null,"payload_length":null}"# + "\n")
        #expect(nulls == Frame(type: "ping", version: nil))

        let zeros = try decodeOne(#"{"type":"ping","data":{"text":"x"},"data_length":0,"payload_length":0}"# + "\n")
        #expect(zeros == Frame(type: "ping", version: nil, data: ["text": .string("x")]))
    }

    @Test("frames written by Python Wyoming (spaces, other key order, null fields) decode")
    func pythonWyomingFrames() throws {
        let block = #"{"rate": 16000, "width": 2, "channels": 1, "timestamp": null}"#
        let header = #"{"type": "audio-chunk", "version": "1.10.2", "data_length": \#(block.utf8.count), "payload_length": 4}"#
        let text = #"{"text": "héllo wörld"}"#
        let second = #"{"type": "transcript", "version": "1.10.2", "data_length": \#(text.utf8.count)}"#
        let bytes = Array((header + "\n" + block).utf8) + [1, 2, 3, 4] + Array((second + "\n" + text).utf8)
        let outcome = decodeStream(bytes)
        #expect(outcome.error == nil)
        try #require(outcome.frames.count == 2)
        #expect(outcome.frames[0].version == "1.10.2")
        #expect(outcome.frames[0].payload == [1, 2, 3, 4])
        #expect(try outcome.frames[0].decode(AudioChunk.self) == AudioChunk(format: AudioFormatFields(rate: 16000, width: 2, channels: 1)))
        #expect(try outcome.frames[1].decode(Transcript.self).text == "héllo wörld")
    }

    @Test("lenient reading: CRLF line end, unknown header and data fields, integral-valued float lengths")
    func lenientReading() throws {
        let crlf = try decodeOne(#"{"type":"ping","extra":{"x":[1]}}"# + "\r\n")
        #expect(crlf == Frame(type: "ping", version: nil))

        let floatLengths = try decodeOne(Array((#"{"type":"transcript","data_length":2.0,"payload_length":1e0}"# + "\n{}").utf8) + [9])
        #expect(floatLengths.data.isEmpty)
        #expect(floatLengths.payload == [9])

        let extra = Frame(type: "transcript", data: ["text": .string("t"), "confidence": .double(0.5), "future": .object([:])])
        #expect(try extra.decode(Transcript.self) == Transcript(text: "t"))
    }

    @Test("JSON values keep integers exact and survive a frame round trip")
    func jsonValues() throws {
        let data: [String: JSONValue] = [
            "max": .int(.max), "min": .int(.min), "half": .double(0.5), "tiny": .double(-1.25e-300),
            "s": .string("line\nbreak \"quoted\" \\ / \u{0} é 😀 \u{2028}"), "n": .null, "b": .bool(false),
            "nested": .object(["a": .array([.int(1), .bool(true), .null, .object([:]), .array([])])]),
        ]
        let frame = Frame(type: "x.y", data: data, payload: [0, 0x0A, 0xFF])
        let decoded = try decodeOne(frame.encoded())
        #expect(decoded == frame)
        #expect(JSONValue.int(7).intValue == 7)
        #expect(JSONValue.double(7).intValue == 7)
        #expect(JSONValue.double(7.5).intValue == nil)
        #expect(JSONValue.string("7").intValue == nil)
        #expect(JSONValue.object([:]).objectValue == [:])
        #expect(JSONValue.string("s").stringValue == "s")
    }

    @Test("an integral double is written as an integer and reads back as .int")
    func integralDoubleNormalizes() throws {
        let decoded = try decodeOne(Frame(type: "t", data: ["d": .double(5)]).encoded())
        #expect(decoded.data["d"] == .int(5))
    }

    @Test("a header of exactly maxHeaderBytes is accepted")
    func headerAtLimit() throws {
        let limits = FrameLimits(maxHeaderBytes: 64, maxDataBytes: 16, maxPayloadBytes: 16)
        let line = #"{"type":""# + String(repeating: "a", count: 64 - 11) + #""}"#
        #expect(line.utf8.count == 64)
        let frame = try decodeOne(line + "\n", limits: limits)
        #expect(frame.type.count == 53)
    }

    @Test("the request id is read from the data")
    func requestID() throws {
        #expect(try Frame(StatusRequest(id: "r-1")).requestID == "r-1")
        #expect(try Frame(StatusRequest()).requestID == nil)
        #expect(Frame(type: "x", data: ["id": .int(3)]).requestID == nil)
    }
}
