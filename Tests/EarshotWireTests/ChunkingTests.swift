import EarshotSystem
import EarshotWire
import Testing

/// A stream of many frames: every sample event, hand-written frames with inline data, merged data,
/// no version and null lengths, and frames with payloads.
func sampleStream() throws -> (bytes: [UInt8], frames: [Frame]) {
    var frames: [Frame] = [
        try Frame(Describe()), try Frame(Samples.info), try Frame(Ping(text: "p")), try Frame(Pong()),
        try Frame(ErrorEvent(text: "e", code: .badRequest, id: "1")),
        try Frame(AudioStart(format: Samples.format, timestamp: 0)),
        try Frame(AudioStop(timestamp: 20)), try Frame(Transcribe(language: "en")), try Frame(Transcript(text: "t")),
        try Frame(TranscriptStart()), try Frame(TranscriptChunk(text: "c")), try Frame(TranscriptStop()),
        try Frame(Hello(id: "h", appId: "a.b")), try Frame(Samples.welcome), try Frame(StatusRequest(id: "s")),
        try Frame(Samples.status), try Frame(ConfigRequest()), try Frame(Samples.config),
        Frame(type: "x", version: nil, data: ["n": .null], payload: [0x0A, 0x0A, 0x7B]),
    ]
    for i in 0..<20 {
        let payload = (0..<(i * 13)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ i) }
        frames.append(try Frame(AudioChunk(format: Samples.format, timestamp: Int64(i) * 20), payload: payload))
    }
    var bytes: [UInt8] = []
    for frame in frames { bytes += try frame.encoded() }

    // Hand-written placements a writer of ours never produces.
    let raw: [(String, [UInt8], Frame)] = [
        (#"{"type":"transcript","data":{"text":"inline"}}"#, [],
         Frame(type: "transcript", version: nil, data: ["text": .string("inline")])),
        (#"{"type":"transcript","version":"1.5.0","data":{"text":"old","language":"fr"},"data_length":14}"#, Array(#"{"text":"new"}"#.utf8),
         Frame(type: "transcript", version: "1.5.0", data: ["text": .string("new"), "language": .string("fr")])),
        (#"{"type":"audio-stop","data_length":null,"payload_length":null}"#, [],
         Frame(type: "audio-stop", version: nil)),
        (#"{"type":"blob","payload_length":3}"#, [0, 0x0A, 0xFF],
         Frame(type: "blob", version: nil, payload: [0, 0x0A, 0xFF])),
    ]
    for (header, body, frame) in raw {
        bytes += Array(header.utf8) + [0x0A] + body
        frames.append(frame)
    }
    return (bytes, frames)
}

@Suite("Chunking and randomized input")
struct ChunkingTests {
    @Test("many frames decode the same whole, one byte at a time and in random splits")
    func chunkingIsInvisible() throws {
        let (bytes, frames) = try sampleStream()
        let whole = decodeStream(bytes)
        #expect(whole.error == nil)
        #expect(whole.frames == frames)

        let bytewise = decodeStream(bytes) { _ in 1 }
        #expect(bytewise == whole)
        #expect(bytewise.boundViolations == 0)

        for seed: UInt64 in 1...25 {
            var rng = SplitMix64(seed: seed)
            let split = decodeStream(bytes) { remaining in
                rng.chance(10) ? rng.int(1...remaining) : rng.int(1...40)
            }
            #expect(split == whole, "seed \(seed)")
            #expect(split.boundViolations == 0, "seed \(seed)")
        }
    }

    @Test("a long stream (past the decoder's compaction threshold) decodes identically in random splits")
    func longStream() throws {
        var rng = SplitMix64(seed: 0xC0FFEE)
        var frames: [Frame] = []
        var bytes: [UInt8] = []
        for i in 0..<160 {
            let frame = try Frame(AudioChunk(format: Samples.format, timestamp: Int64(i) * 40), payload: rng.bytes(rng.int(1_000...3_000)))
            frames.append(frame)
            bytes += try frame.encoded()
        }
        #expect(bytes.count > 4 << 16)
        for chunk in [1_000, 7_919, 65_537, 100_003] {
            let outcome = decodeStream(bytes) { _ in chunk }
            #expect(outcome.error == nil, "chunk \(chunk)")
            #expect(outcome.frames == frames, "chunk \(chunk)")
            #expect(outcome.boundViolations == 0)
        }
        let random = decodeStream(bytes) { remaining in rng.int(1...min(remaining, 40_000)) }
        #expect(random.frames == frames)
        #expect(random.error == nil)
    }

    @Test("feeding everything before taking frames out works too")
    func feedAllThenDrain() throws {
        let (bytes, frames) = try sampleStream()
        var decoder = FrameDecoder()
        for byte in bytes { decoder.feed(CollectionOfOne(byte)) }
        #expect(decoder.bufferedByteCount == bytes.count)
        var out: [Frame] = []
        while let frame = try decoder.next() { out.append(frame) }
        #expect(out == frames)
        #expect(decoder.bufferedByteCount == 0)
        try decoder.finish()
    }

    @Test(
        "randomized: thousands of random and mutated frames in random splits never crash, hang or over-buffer",
        .timeLimit(.minutes(1)),
        arguments: [0x5EED_0001, 0x5EED_0002, 0x5EED_0003, 0x5EED_0004] as [UInt64])
    func fuzz(seed: UInt64) throws {
        var rng = SplitMix64(seed: seed)
        let limits = FrameLimits(maxHeaderBytes: 200, maxDataBytes: 400, maxPayloadBytes: 64)
        var framesIn = 0, framesOut = 0, mutatedStreams = 0, mismatches = 0
        var errorKinds: Set<String> = []
        var worst = Outcome()

        for stream in 0..<750 {
            var bytes: [UInt8] = []
            var expected: [Frame] = []
            var exact = true
            for _ in 0..<rng.int(1...5) {
                if rng.chance(70) {
                    var frame = Fuzz.frame(&rng)
                    var encoded = try frame.encoded()
                    if !Fuzz.fits(encoded, frame, limits) {
                        frame.data = [:]
                        encoded = try frame.encoded()
                    }
                    bytes += encoded
                    expected.append(frame)
                } else {
                    bytes += Fuzz.craftedFrame(&rng)
                    exact = false
                }
                framesIn += 1
            }
            if rng.chance(60) {
                Fuzz.mutate(&bytes, &rng)
                mutatedStreams += 1
                exact = false
            }

            let whole = decodeStream(bytes, limits: limits)
            let split = decodeStream(bytes, limits: limits) { remaining in
                rng.chance(20) ? rng.int(1...remaining) : rng.int(1...24)
            }
            if split != whole { mismatches += 1 }
            if exact {
                #expect(whole.error == nil, "seed \(seed) stream \(stream)")
                #expect(whole.frames == expected, "seed \(seed) stream \(stream)")
            }
            if stream % 10 == 0 {
                let bytewise = decodeStream(bytes, limits: limits) { _ in 1 }
                if bytewise != whole { mismatches += 1 }
                worst.boundViolations += bytewise.boundViolations
            }
            framesOut += whole.frames.count
            if let error = whole.error { errorKinds.insert(Fuzz.kind(error)) }
            for outcome in [whole, split] {
                worst.boundViolations += outcome.boundViolations
                worst.stickyViolations += outcome.stickyViolations
                worst.maxBuffered = max(worst.maxBuffered, outcome.maxBuffered)
            }
        }

        #expect(mismatches == 0, "chunk splits changed the outcome")
        #expect(worst.boundViolations == 0)
        #expect(worst.stickyViolations == 0)
        #expect(worst.maxBuffered <= limits.maxHeaderBytes + limits.maxDataBytes + limits.maxPayloadBytes)
        // The generator really exercises both paths.
        #expect(framesIn > 2_000)
        #expect(framesOut > framesIn / 4)
        #expect(mutatedStreams > 300)
        #expect(errorKinds.count >= 11, "only saw \(errorKinds.sorted())")
    }
}

/// Generators for the randomized test.
enum Fuzz {
    static let types = [
        "describe", "info", "ping", "pong", "error", "audio-start", "audio-chunk", "audio-stop", "transcribe",
        "transcript", "earshot.hello", "earshot.status", "earshot.config", "x",
    ]
    static let characters: [String] = [
        "a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\u{0}", "\u{1F}", "é", "€", "😀", "\u{2028}", "{", "}", ":",
    ]

    static func string(_ rng: inout SplitMix64, maxLength: Int = 10) -> String {
        (0..<rng.int(0...maxLength)).map { _ in rng.pick(characters) }.joined()
    }

    static func value(_ rng: inout SplitMix64, depth: Int) -> JSONValue {
        switch rng.int(0...(depth > 0 ? 7 : 5)) {
        case 0: return .null
        case 1: return .bool(rng.chance(50))
        case 2: return .int(rng.chance(20) ? Int64(bitPattern: rng.next()) : Int64(rng.int(-1000...100_000)))
        case 3:
            let d = Double(bitPattern: rng.next())
            return .double(d.isFinite && d.rounded() != d ? d : Double(rng.int(-1000...1000)) + 0.25)
        case 4, 5: return .string(string(&rng))
        case 6: return .array((0..<rng.int(0...3)).map { _ in value(&rng, depth: depth - 1) })
        default: return .object(object(&rng, depth: depth - 1))
        }
    }

    static func object(_ rng: inout SplitMix64, depth: Int) -> [String: JSONValue] {
        var o: [String: JSONValue] = [:]
        for _ in 0..<rng.int(0...4) { o[string(&rng, maxLength: 6)] = value(&rng, depth: depth) }
        return o
    }

    static func frame(_ rng: inout SplitMix64) -> Frame {
        let type = rng.chance(60) ? rng.pick(types) : "t" + string(&rng)
        let version: String? = rng.chance(20) ? nil : rng.chance(70) ? WireProtocol.wyomingVersion : string(&rng)
        let payload = rng.chance(50) ? [] : rng.bytes(rng.int(1...64))
        return Frame(type: type, version: version, data: object(&rng, depth: 3), payload: payload)
    }

    /// Whether an encoded frame is within `limits` (header line, data block, payload).
    static func fits(_ encoded: [UInt8], _ frame: Frame, _ limits: FrameLimits) -> Bool {
        guard let newline = encoded.firstIndex(of: 0x0A) else { return false }
        let block = encoded.count - newline - 1 - frame.payload.count
        return newline <= limits.maxHeaderBytes && block <= limits.maxDataBytes && frame.payload.count <= limits.maxPayloadBytes
    }

    static let lengthTokens = [
        "-1", "-0", "1.5", "2.0", "1e2", "\"3\"", "null", "true", "[]", "{}", "99999999999999999999", "1e400",
        "9223372036854775807", "-9223372036854775808", "0x10", "+1", "01",
    ]

    static func lengthToken(_ rng: inout SplitMix64) -> String {
        switch rng.int(0...9) {
        case 0...3: return String(rng.int(0...80))
        case 4...5: return String(rng.int(0...1_000))
        case 6: return String(rng.int(-100 ... -1))
        default: return rng.pick(lengthTokens)
        }
    }

    /// A hand-written header with random (often wrong) length fields and inline data, then a body
    /// that matches the announced lengths or is random.
    static func craftedFrame(_ rng: inout SplitMix64) -> [UInt8] {
        var fields = [#""type":"\#(rng.pick(types))""#]
        let dataLength = lengthToken(&rng), payloadLength = lengthToken(&rng)
        if rng.chance(80) { fields.append(#""data_length":\#(dataLength)"#) }
        if rng.chance(60) { fields.append(#""payload_length":\#(payloadLength)"#) }
        if rng.chance(30) { fields.append(#""data":{"text":"inline","n":\#(rng.int(0...9))}"#) }
        if rng.chance(10) { fields.append(#""data":\#(rng.pick(["[1]", "\"s\"", "null", "7"]))"#) }
        if rng.chance(10) { fields.append(#""version":\#(rng.pick(["1", "null", "\"1.7.0\"", "[]"]))"#) }
        var bytes = Array(("{" + fields.joined(separator: ",") + "}").utf8) + [0x0A]
        if rng.chance(60), let n = Int(dataLength), let m = Int(payloadLength), n >= 0, m >= 0, n < 2_000, m < 2_000 {
            if n >= 2 { bytes += Array("{}".utf8) + Array(repeating: 0x20, count: n - 2) } else { bytes += rng.bytes(n) }
            bytes += rng.bytes(m)
        } else {
            bytes += rng.bytes(rng.int(0...100))
        }
        return bytes
    }

    static let structural = Array("{}[]\":,\n\\0123456789-.e ".utf8) + [0x00, 0x80, 0xC3, 0xFF]

    /// One to four random mutations: bit flips, truncation, insertions, deletions, duplicated
    /// slices, rewritten length fields.
    static func mutate(_ bytes: inout [UInt8], _ rng: inout SplitMix64) {
        for _ in 0..<rng.int(1...4) where !bytes.isEmpty {
            let at = rng.int(0...(bytes.count - 1))
            switch rng.int(0...6) {
            case 0:
                bytes[at] ^= UInt8(1) << UInt8(rng.int(0...7))
            case 1:
                bytes.removeLast(bytes.count - at)
            case 2:
                let inserted = (0..<rng.int(1...8)).map { _ in rng.chance(70) ? rng.pick(structural) : UInt8(truncatingIfNeeded: rng.next()) }
                bytes.insert(contentsOf: inserted, at: at)
            case 3:
                bytes.removeSubrange(at..<min(bytes.count, at + rng.int(1...16)))
            case 4:
                let slice = bytes[at..<min(bytes.count, at + rng.int(1...64))]
                bytes.insert(contentsOf: slice, at: rng.int(0...bytes.count))
            default:
                rewriteLength(&bytes, &rng)
            }
        }
    }

    /// Replaces the value of one `data_length`/`payload_length` field with a random token.
    static func rewriteLength(_ bytes: inout [UInt8], _ rng: inout SplitMix64) {
        let key = Array((rng.chance(50) ? #""data_length":"# : #""payload_length":"#).utf8)
        var starts: [Int] = []
        var i = 0
        while i + key.count <= bytes.count {
            if bytes[i..<(i + key.count)].elementsEqual(key) { starts.append(i + key.count) }
            i += 1
        }
        guard !starts.isEmpty else { return }
        let start = rng.pick(starts)
        var end = start
        while end < bytes.count, bytes[end] != UInt8(ascii: ","), bytes[end] != UInt8(ascii: "}") { end += 1 }
        bytes.replaceSubrange(start..<end, with: Array(lengthToken(&rng).utf8))
    }

    static func kind(_ error: FrameError) -> String {
        switch error {
        case .headerTooLarge: "headerTooLarge"
        case .headerNotUTF8: "headerNotUTF8"
        case .headerNotJSON: "headerNotJSON"
        case .headerNotObject: "headerNotObject"
        case .missingType: "missingType"
        case .invalidField(let field): "invalidField(\(field))"
        case .dataTooLarge: "dataTooLarge"
        case .payloadTooLarge: "payloadTooLarge"
        case .dataNotUTF8: "dataNotUTF8"
        case .dataNotObject: "dataNotObject"
        case .truncated: "truncated"
        }
    }
}
