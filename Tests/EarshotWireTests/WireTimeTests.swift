import EarshotWire
import Foundation
import Testing

@Suite("WireTime and WireTimeRange")
struct WireTimeTests {
    func t(_ value: Int64, _ timescale: Int32) -> WireTime { WireTime(value: value, timescale: timescale) }

    @Test("equality and order are exact across timescales")
    func exactComparisons() {
        #expect(t(1, 2) == t(24000, 48000))
        #expect(t(-1, 2) == t(-24000, 48000))
        #expect(t(0, 1) == t(0, 48000))
        #expect(t(16000, 48000) == t(1, 3))
        #expect(t(16001, 48000) > t(1, 3))
        #expect(t(15999, 48000) < t(1, 3))
        #expect(t(1, 44100) < t(1, 44099))
        #expect(t(147, 44100) == t(160, 48000))
        // Far beyond Double precision: these differ by one tick of 1/2^31 s at ~2^62 s.
        #expect(t(.max, 1) > t(.max - 1, 1))
        #expect(t(.max, Int32.max) < t(.max, Int32.max - 1))
        #expect(t(.min, 1) < t(.min + 1, 1))
        #expect(t(.max, 1) != t(.max - 1, 1))
        #expect([t(3, 4), t(1, 2), t(-1, 1), t(2, 3)].sorted() == [t(-1, 1), t(1, 2), t(2, 3), t(3, 4)])
    }

    @Test("equal times hash equally (Set and Dictionary keys)")
    func hashConsistency() {
        let equalGroups: [[WireTime]] = [
            [t(1, 2), t(24000, 48000), t(8000, 16000), t(22050, 44100)],
            [t(0, 1), t(0, 48000), t(0, Int32.max)],
            [t(-3, 4), t(-36000, 48000)],
            [t(7, 1), t(7 * 48000, 48000)],
        ]
        for group in equalGroups {
            for a in group {
                for b in group {
                    #expect(a == b)
                    #expect(a.hashValue == b.hashValue, "\(a) vs \(b)")
                }
            }
        }
        #expect(Set(equalGroups.joined()).count == equalGroups.count)
        var seconds: [WireTime: String] = [:]
        seconds[t(48000, 48000)] = "one"
        #expect(seconds[t(1, 1)] == "one")
    }

    @Test("extreme values hash without trapping")
    func extremeHash() {
        let extremes = [t(.min, 1), t(.min, 48000), t(.min, Int32.max), t(.max, 1), t(.max, Int32.max), t(.min + 1, 2)]
        #expect(Set(extremes).count == extremes.count)
        #expect(t(.min, 2).hashValue == t(.min / 2, 1).hashValue)
        #expect(t(.min, 2) == t(.min / 2, 1))
    }

    @Test("+ and - are exact at the lcm timescale")
    func arithmetic() {
        let sum = t(1, 2) + t(1, 3)
        #expect(sum.value == 5 && sum.timescale == 6)
        let diff = t(1, 3) - t(1, 2)
        #expect(diff.value == -1 && diff.timescale == 6)
        let mixed = t(1, 44100) + t(1, 48000)
        #expect(mixed.timescale == 7_056_000)
        #expect(mixed.value == 160 + 147)
        let same = t(100, 16000) - t(40, 16000)
        #expect(same.value == 60 && same.timescale == 16000)
        #expect(t(1, 16000) + t(2, 48000) == t(5, 48000))
        #expect((t(5, 48000) - t(1, 16000)).timescale == 48000)
        #expect(t(1, 3) + .zero == t(1, 3))
    }

    @Test("+ falls back to the larger timescale when the lcm does not fit Int32")
    func arithmeticFallback() {
        let a = t(1, Int32.max), b = t(1, Int32.max - 1)
        let sum = a + b
        #expect(sum.timescale == Int32.max)
        #expect(sum.value == 2)
    }

    @Test("conversion rounds to the nearest tick, halves away from zero")
    func conversion() {
        #expect(t(1, 3).converted(to: 1000) == t(333, 1000))
        #expect(t(1, 3).converted(to: 1000).value == 333)
        #expect(t(2, 3).converted(to: 1000).value == 667)
        #expect(t(-2, 3).converted(to: 1000).value == -667)
        #expect(t(1, 4).converted(to: 2).value == 1)
        #expect(t(-1, 4).converted(to: 2).value == -1)
        #expect(t(3, 4).converted(to: 2).value == 2)
        #expect(t(1, 48000).converted(to: 44100).value == 1)
        #expect(t(24000, 48000).converted(to: 16000) == t(8000, 16000))
        #expect(t(24000, 48000).converted(to: 16000).timescale == 16000)
        #expect(t(.max, 1).converted(to: 48000).value == .max)
        #expect(t(.min, 1).converted(to: 48000).value == .min)
    }

    @Test("convenience initializers and seconds")
    func initializers() {
        #expect(WireTime(seconds: 0.5, timescale: 48000) == t(24000, 48000))
        #expect(WireTime(seconds: 1.25).value == 1_250_000)
        #expect(WireTime(seconds: 1.25).timescale == 1_000_000)
        #expect(WireTime(sample: 441, sampleRate: 44100) == t(1, 100))
        #expect(t(3, 4).seconds == 0.75)
        #expect(WireTime.zero == t(0, 7))
        #expect(t(3, 4).description == "3/4")
    }

    @Test("Codable: {value, timescale}, timescale <= 0 or out of range rejected")
    func codable() throws {
        let json = try JSONEncoder().encode(t(-5, 48000))
        let object = try #require(try JSONSerialization.jsonObject(with: json) as? [String: Int])
        #expect(object == ["value": -5, "timescale": 48000])
        #expect(try JSONDecoder().decode(WireTime.self, from: Data(#"{"value":9007199254740993,"timescale":1}"#.utf8)).value == 9_007_199_254_740_993)

        for bad in [#"{"value":1,"timescale":0}"#, #"{"value":1,"timescale":-48000}"#, #"{"value":1,"timescale":4294967296}"#, #"{"value":1}"#, #"{"timescale":1}"#] {
            #expect(throws: DecodingError.self, "\(bad)") { try JSONDecoder().decode(WireTime.self, from: Data(bad.utf8)) }
        }
        let zero = #expect(throws: DecodingError.self) { try JSONDecoder().decode(WireTime.self, from: Data(#"{"value":1,"timescale":0}"#.utf8)) }
        if case .dataCorrupted(let context)? = zero {
            #expect(context.codingPath.last?.stringValue == "timescale")
        } else {
            Issue.record("expected dataCorrupted, got \(String(describing: zero))")
        }
    }

    @Test("time ranges: end = start + duration, built from start and end")
    func ranges() throws {
        let range = WireTimeRange(start: t(1, 2), end: t(3, 4))
        #expect(range.duration == t(1, 4))
        #expect(range.end == t(3, 4))
        #expect(range.description == "[1/2, 3/4)")
        let samples = WireTimeRange(start: t(16000, 16000), duration: t(480, 48000))
        #expect(samples.end == t(1010, 1000))
        let decoded = try JSONDecoder().decode(WireTimeRange.self, from: JSONEncoder().encode(samples))
        #expect(decoded == samples)
        #expect(decoded.start.timescale == 16000 && decoded.duration.timescale == 48000)
    }
}
