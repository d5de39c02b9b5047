import Foundation

/// How the benchmark executables report: unbuffered figures, fatal errors.
public enum BenchmarkOutput {
    /// Prints a line unbuffered, so a failure later never loses figures already measured.
    public static func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

    /// Writes `program: message` to stderr and exits 1.
    public static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("\(ProcessInfo.processInfo.processName): \(message)\n".utf8))
        exit(1)
    }
}

/// A benchmark's command line: `--name value` pairs. An unknown name, a missing value or required
/// option, or an unusable number prints `usage` and exits 1.
public struct BenchmarkOptions: Sendable {
    private var values: [String: String] = [:]
    private var given: Set<String> = []
    private let usage: String

    /// `names` take a value (`--name VALUE`); `flags` take none (`--name`).
    public init(_ arguments: [String], names: Set<String>, flags: Set<String> = [], required: Set<String>, usage: String) {
        self.usage = usage
        var rest = arguments.dropFirst()
        while let flag = rest.popFirst() {
            let name = String(flag.drop { $0 == "-" })
            guard flag.hasPrefix("--") else { BenchmarkOutput.fail(usage) }
            if flags.contains(name) {
                given.insert(name)
                continue
            }
            guard names.contains(name), let value = rest.popFirst() else { BenchmarkOutput.fail(usage) }
            values[name] = value
        }
        if !required.isSubset(of: values.keys) { BenchmarkOutput.fail(usage) }
    }

    /// `--name`'s value (always there for a required one).
    public subscript(_ name: String) -> String? { values[name] }

    /// Whether the flag `--name` was given.
    public func flag(_ name: String) -> Bool { given.contains(name) }

    /// `--name` as a whole number ≥ 1, else `fallback`.
    public func positive(_ name: String, default fallback: Int) -> Int {
        guard let text = values[name] else { return fallback }
        guard let value = Int(text), value > 0 else { BenchmarkOutput.fail(usage) }
        return value
    }

    /// `--models` (comma-separated `tiny.en`, `base`), else both.
    public var models: [WhisperBenchModel] {
        let names = values["models"].map { $0.split(separator: ",").map(String.init) } ?? ["tiny.en", "base"]
        return names.map { name in
            guard let model = WhisperBenchModel(name) else { BenchmarkOutput.fail(usage) }
            return model
        }
    }
}
