/// An exact rational time `value / timescale` seconds, like `CMTime`: sample positions stay exact.
public struct WireTime: Sendable, Codable, CustomStringConvertible, Comparable, Hashable {
    /// Numerator.
    public var value: Int64
    /// Denominator, ticks per second (> 0).
    public var timescale: Int32

    /// A time of `value / timescale` seconds. `timescale` must be positive.
    public init(value: Int64, timescale: Int32) {
        precondition(timescale > 0, "timescale must be positive")
        self.value = value
        self.timescale = timescale
    }

    /// The time of sample `index` at `sampleRate` samples per second.
    public init(sample index: Int64, sampleRate: Int32) {
        self.init(value: index, timescale: sampleRate)
    }

    /// `seconds` (finite) rounded to the nearest tick of `timescale`.
    public init(seconds: Double, timescale: Int32 = 1_000_000) {
        precondition(seconds.isFinite, "seconds must be finite")
        self.init(value: Int64((seconds * Double(timescale)).rounded()), timescale: timescale)
    }

    public static let zero = WireTime(value: 0, timescale: 1)

    /// The time in seconds (inexact).
    public var seconds: Double { Double(value) / Double(timescale) }

    /// This time at another timescale, rounded to the nearest tick.
    public func converted(to newScale: Int32) -> WireTime {
        let scaled = Int128(value) * Int128(newScale)
        let d = Int128(timescale)
        let q = scaled >= 0 ? (scaled + d / 2) / d : (scaled - d / 2) / d
        return WireTime(value: Int64(clamping: q), timescale: newScale)
    }

    public static func < (a: WireTime, b: WireTime) -> Bool {
        Int128(a.value) * Int128(b.timescale) < Int128(b.value) * Int128(a.timescale)
    }

    public static func == (a: WireTime, b: WireTime) -> Bool {
        Int128(a.value) * Int128(b.timescale) == Int128(b.value) * Int128(a.timescale)
    }

    public func hash(into hasher: inout Hasher) {
        // gcd(|value|, timescale) == gcd(|value| mod timescale, timescale); never negates Int64.min.
        let g = Self.gcd(Int64(value.magnitude % UInt64(timescale)), Int64(timescale))
        hasher.combine(value / g)
        hasher.combine(Int64(timescale) / g)
    }

    /// Sum; exact when the common timescale fits, else at the larger of the two timescales.
    public static func + (a: WireTime, b: WireTime) -> WireTime {
        combine(a, b, +)
    }

    /// Difference; exact when the common timescale fits, else at the larger of the two timescales.
    public static func - (a: WireTime, b: WireTime) -> WireTime {
        combine(a, b, -)
    }

    private static func combine(_ a: WireTime, _ b: WireTime, _ op: (Int128, Int128) -> Int128) -> WireTime {
        if a.timescale == b.timescale {
            return WireTime(value: Int64(clamping: op(Int128(a.value), Int128(b.value))), timescale: a.timescale)
        }
        let g = gcd(Int64(a.timescale), Int64(b.timescale))
        let lcm = Int64(a.timescale) / g * Int64(b.timescale)
        let scale = lcm <= Int64(Int32.max) ? Int32(lcm) : max(a.timescale, b.timescale)
        let x = a.converted(to: scale), y = b.converted(to: scale)
        return WireTime(value: Int64(clamping: op(Int128(x.value), Int128(y.value))), timescale: scale)
    }

    private static func gcd(_ a: Int64, _ b: Int64) -> Int64 {
        var (x, y) = (a, b)
        while y != 0 { (x, y) = (y, x % y) }
        return x == 0 ? 1 : x
    }

    public var description: String { "\(value)/\(timescale)" }

    enum CodingKeys: String, CodingKey { case value, timescale }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let value = try c.decode(Int64.self, forKey: .value)
        let timescale = try c.decode(Int32.self, forKey: .timescale)
        guard timescale > 0 else {
            throw DecodingError.dataCorruptedError(forKey: .timescale, in: c, debugDescription: "timescale must be positive")
        }
        self.init(value: value, timescale: timescale)
    }
}

/// A time range: a start and a non-negative duration.
public struct WireTimeRange: Sendable, Codable, Hashable, CustomStringConvertible {
    public var start: WireTime
    public var duration: WireTime
    public init(start: WireTime, duration: WireTime) {
        self.start = start
        self.duration = duration
    }
    /// The range from `start` to `end`.
    public init(start: WireTime, end: WireTime) {
        self.init(start: start, duration: end - start)
    }
    /// `start + duration`.
    public var end: WireTime { start + duration }

    enum CodingKeys: String, CodingKey { case start, duration }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let duration = try c.decode(WireTime.self, forKey: .duration)
        guard duration.value >= 0 else {
            throw DecodingError.dataCorruptedError(forKey: .duration, in: c, debugDescription: "duration must not be negative")
        }
        self.init(start: try c.decode(WireTime.self, forKey: .start), duration: duration)
    }
    public var description: String { "[\(start), \(end))" }
}
