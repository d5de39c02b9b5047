import Foundation

/// Counters and histograms by label values, written in Prometheus' text exposition format
/// (version 0.0.4). Thread-safe; recording is a dictionary update under a lock.
public final class MetricsRegistry: @unchecked Sendable {
    public enum Kind: String, Sendable { case counter, gauge, histogram }

    /// One metric family: a name, its help text, its label names and a value per label set.
    public final class Family: @unchecked Sendable {
        public let name: String
        public let help: String
        public let kind: Kind
        public let labels: [String]
        let buckets: [Double]
        private let lock = NSLock()
        // Guarded by `lock`: label values → value (counters, gauges) or bucket counts, sum, count.
        private var values: [[String]: Double] = [:]
        private var histograms: [[String]: (buckets: [Int], sum: Double, count: Int)] = [:]

        init(name: String, help: String, kind: Kind, labels: [String], buckets: [Double]) {
            self.name = name
            self.help = help
            self.kind = kind
            self.labels = labels
            self.buckets = buckets
        }

        /// Adds `amount` (counters) for the label values, in `labels` order.
        public func add(_ amount: Double = 1, _ labelValues: String...) {
            lock.withLock { values[labelValues, default: 0] += amount }
        }

        /// Sets a gauge's value for the label values.
        public func set(_ value: Double, _ labelValues: String...) {
            lock.withLock { values[labelValues] = value }
        }

        /// Replaces every value of a gauge (a snapshot taken at scrape time).
        public func replace(_ snapshot: [[String]: Double]) {
            lock.withLock { values = snapshot }
        }

        /// Records one observation in a histogram.
        public func observe(_ value: Double, _ labelValues: String...) {
            lock.withLock {
                var entry = histograms[labelValues] ?? (Array(repeating: 0, count: buckets.count), 0, 0)
                for (index, bound) in buckets.enumerated() where value <= bound { entry.buckets[index] += 1 }
                entry.sum += value
                entry.count += 1
                histograms[labelValues] = entry
            }
        }

        /// Every value now: a counter's or gauge's value, a histogram's count and sum, by label set.
        public func samples() -> [MetricsRegistry.Sample] {
            lock.withLock {
                let names = labels
                if kind == .histogram {
                    return histograms.keys.sorted { $0.lexicographicallyPrecedes($1) }.map { key in
                        let entry = histograms[key]!
                        return Sample(name: name, kind: kind, labels: Dictionary(uniqueKeysWithValues: zip(names, key)), value: entry.sum, count: entry.count)
                    }
                }
                return values.keys.sorted { $0.lexicographicallyPrecedes($1) }.map { key in
                    Sample(name: name, kind: kind, labels: Dictionary(uniqueKeysWithValues: zip(names, key)), value: values[key]!, count: nil)
                }
            }
        }

        func write(into out: inout String) {
            out += "# HELP \(name) \(help.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\n", with: "\\n"))\n"
            out += "# TYPE \(name) \(kind.rawValue)\n"
            lock.withLock {
                if kind == .histogram {
                    for key in histograms.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
                        let entry = histograms[key]!
                        for (index, bound) in buckets.enumerated() {
                            out += "\(name)_bucket\(Self.labelText(labels + ["le"], key + [Self.number(bound)])) \(entry.buckets[index])\n"
                        }
                        out += "\(name)_bucket\(Self.labelText(labels + ["le"], key + ["+Inf"])) \(entry.count)\n"
                        out += "\(name)_sum\(Self.labelText(labels, key)) \(Self.number(entry.sum))\n"
                        out += "\(name)_count\(Self.labelText(labels, key)) \(entry.count)\n"
                    }
                } else {
                    for key in values.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
                        out += "\(name)\(Self.labelText(labels, key)) \(Self.number(values[key]!))\n"
                    }
                }
            }
        }

        static func labelText(_ names: [String], _ values: [String]) -> String {
            guard !names.isEmpty else { return "" }
            let pairs = zip(names, values).map { name, value in
                "\(name)=\"\(value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: "\\n"))\""
            }
            return "{" + pairs.joined(separator: ",") + "}"
        }

        static func number(_ value: Double) -> String {
            value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : "\(value)"
        }
    }

    /// One value of a family (``Family/samples()``): for a histogram, `value` is the sum of its
    /// observations and `count` their number.
    public struct Sample: Sendable, Hashable {
        public var name: String
        public var kind: Kind
        public var labels: [String: String]
        public var value: Double
        public var count: Int?
    }

    private let lock = NSLock()
    // Guarded by `lock`.
    private var families: [Family] = []

    public init() {}

    /// Registers a family (names follow Prometheus' conventions: `_total` for counters, base units).
    public func family(_ name: String, _ help: String, kind: Kind, labels: [String] = [], buckets: [Double] = []) -> Family {
        let family = Family(name: name, help: help, kind: kind, labels: labels, buckets: buckets.sorted())
        lock.withLock { families.append(family) }
        return family
    }

    /// Every family in the text exposition format.
    public func exposition() -> String {
        var out = ""
        for family in lock.withLock({ families }) { family.write(into: &out) }
        return out
    }

    /// Every family's samples, in registration order: the same numbers ``exposition()`` writes.
    public func samples() -> [Sample] {
        lock.withLock { families }.flatMap { $0.samples() }
    }

    /// `Content-Type` of ``exposition()``.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"
}
