import EarshotWire

/// Ticks of a ``CMTime`` (CoreMedia's `CMTimeValue`).
public typealias CMTimeValue = Int64
/// Ticks per second of a ``CMTime`` (CoreMedia's `CMTimeScale`).
public typealias CMTimeScale = Int32

/// An exact media time, `value / timescale` seconds (CoreMedia's `CMTime`); sample positions stay
/// exact. Arithmetic and comparison are exact rationals.
public struct CMTime: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var value: CMTimeValue
    public var timescale: CMTimeScale

    /// `value / timescale` seconds; `timescale` must be positive.
    public init(value: CMTimeValue, timescale: CMTimeScale) {
        precondition(timescale > 0, "CMTime timescale must be positive")
        self.value = value
        self.timescale = timescale
    }

    /// `seconds` (finite) rounded to the nearest tick of `preferredTimescale`.
    public init(seconds: Double, preferredTimescale: CMTimeScale) {
        self.init(WireTime(seconds: seconds, timescale: preferredTimescale))
    }

    public static let zero = CMTime(value: 0, timescale: 1)

    /// The time in seconds (inexact).
    public var seconds: Double { wire.seconds }

    /// This time at `timescale`, rounded to the nearest tick (CoreMedia's `CMTimeConvertScale`).
    public func convertScale(_ timescale: CMTimeScale) -> CMTime { CMTime(wire.converted(to: timescale)) }

    public static func < (a: CMTime, b: CMTime) -> Bool { a.wire < b.wire }
    public static func == (a: CMTime, b: CMTime) -> Bool { a.wire == b.wire }
    public func hash(into hasher: inout Hasher) { wire.hash(into: &hasher) }
    public static func + (a: CMTime, b: CMTime) -> CMTime { CMTime(a.wire + b.wire) }
    public static func - (a: CMTime, b: CMTime) -> CMTime { CMTime(a.wire - b.wire) }

    public var description: String { "CMTime(\(value)/\(timescale) = \(seconds) s)" }

    /// The wire protocol's form of this time.
    package var wire: WireTime { WireTime(value: value, timescale: timescale) }
    package init(_ wire: WireTime) { self.init(value: wire.value, timescale: wire.timescale) }
}

/// The time in seconds (CoreMedia's C function).
public func CMTimeGetSeconds(_ time: CMTime) -> Float64 { time.seconds }

/// A start and a non-negative duration (CoreMedia's `CMTimeRange`).
public struct CMTimeRange: Sendable, Hashable, CustomStringConvertible {
    public var start: CMTime
    public var duration: CMTime

    public init(start: CMTime, duration: CMTime) {
        self.start = start
        self.duration = duration
    }

    /// The range from `start` to `end`.
    public init(start: CMTime, end: CMTime) {
        self.init(start: start, duration: end - start)
    }

    public static let zero = CMTimeRange(start: .zero, duration: .zero)

    /// `start + duration`.
    public var end: CMTime { start + duration }
    /// Whether the duration is zero.
    public var isEmpty: Bool { duration.value == 0 }

    /// Whether `time` lies in `[start, end)`.
    public func containsTime(_ time: CMTime) -> Bool { time >= start && time < end }

    /// Whether `range` lies within this range.
    public func containsTimeRange(_ range: CMTimeRange) -> Bool { range.start >= start && range.end <= end }

    /// The overlap of the two ranges (empty at the later start when they do not overlap).
    public func intersection(_ other: CMTimeRange) -> CMTimeRange {
        let lower = max(start, other.start)
        return CMTimeRange(start: lower, end: max(lower, min(end, other.end)))
    }

    public var description: String { "CMTimeRange([\(start.seconds) s, \(end.seconds) s))" }

    /// The wire protocol's form of this range.
    package var wire: WireTimeRange { WireTimeRange(start: start.wire, duration: duration.wire) }
    package init(_ wire: WireTimeRange) { self.init(start: CMTime(wire.start), duration: CMTime(wire.duration)) }
}

/// `range.end` (CoreMedia's C function).
public func CMTimeRangeGetEnd(_ range: CMTimeRange) -> CMTime { range.end }

/// Whether `range` contains `time` (CoreMedia's C function).
public func CMTimeRangeContainsTime(_ range: CMTimeRange, time: CMTime) -> Bool { range.containsTime(time) }
