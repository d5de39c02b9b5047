import EarshotSystem
import EarshotWire
import Foundation

/// The effective configuration: registry defaults, then the config file, its drop-ins
/// (`<file>.d/*.conf` in lexical order), then command-line overrides.
public struct DaemonConfig: Sendable {
    struct Assignment: Sendable {
        var values: [String]
        var source: String
    }

    private var settings: [String: Assignment] = [:]
    /// Problems found while loading, each with file:line; the affected key keeps its previous value.
    public private(set) var warnings: [String] = []
    /// Bad values of fatal keys (``ConfigKey/fatal``), each with file:line: the daemon refuses to
    /// start while there are any.
    public private(set) var errors: [String] = []
    /// Files read, in order.
    public private(set) var files: [String] = []

    public init() {}

    /// Loads `path` and its drop-in directory. A missing main file is not an error.
    public static func load(path: String?) -> DaemonConfig {
        var config = DaemonConfig()
        guard let path else { return config }
        config.read(file: path, required: false)
        let dropInDir = path + ".d"
        if let names = try? FileManager.default.contentsOfDirectory(atPath: dropInDir) {
            for name in names.sorted() where name.hasSuffix(".conf") {
                config.read(file: (dropInDir as NSString).appendingPathComponent(name), required: true)
            }
        }
        return config
    }

    /// Parses INI text (`[Section]`, `Key=Value`, `#`/`;` comments, trailing `\` continues a line).
    public mutating func parse(_ text: String, source: String) {
        var section: String?
        var pending = ""
        var pendingLine = 0
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            var line = rawLine.trimmingCharacters(in: .whitespaces)
            if pending.isEmpty { pendingLine = index + 1 }
            if line.hasSuffix("\\") {
                line.removeLast()
                pending += line + " "
                continue
            }
            line = (pending + line).trimmingCharacters(in: .whitespaces)
            pending = ""
            let location = "\(source):\(pendingLine)"
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") {
                guard line.hasSuffix("]") else {
                    warnings.append("\(location): malformed section header '\(line)'")
                    section = nil
                    continue
                }
                let name = String(line.dropFirst().dropLast()).trimmingCharacters(in: .whitespaces)
                if ConfigRegistry.keys.contains(where: { $0.section == name }) {
                    section = name
                } else {
                    warnings.append("\(location): unknown section [\(name)], its keys are ignored")
                    section = "?"
                }
                continue
            }
            guard let eq = line.firstIndex(of: "=") else {
                warnings.append("\(location): expected Key=Value, got '\(line)'")
                continue
            }
            let name = line[..<eq].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: eq)...].trimmingCharacters(in: .whitespaces)
            guard let section else {
                warnings.append("\(location): '\(name)' is outside any [Section]")
                continue
            }
            if section == "?" { continue }
            set("\(section).\(name)", value, source: location)
        }
    }

    /// Sets a key as the given source would (validating it); returns the warning, if any.
    @discardableResult
    public mutating func set(_ id: String, _ value: String, source: String) -> String? {
        guard let key = ConfigRegistry.key(id) else {
            return warn("\(source): unknown key \(id)")
        }
        if key.repeatable {
            if value.isEmpty {
                settings[key.id] = Assignment(values: [], source: source)
                return nil
            }
            if let problem = key.validate(value) { return warn("\(source): \(key.id)=\(value): \(problem); ignored") }
            var current = settings[key.id]?.values ?? []
            current.append(value)
            settings[key.id] = Assignment(values: current, source: source)
            return nil
        }
        if let problem = key.validate(value), key.fatal {
            let message = "\(source): \(key.id)=\(value): \(problem)"
            errors.append(message)
            return message
        } else if let problem = key.validate(value) {
            return warn("\(source): \(key.id)=\(value): \(problem); keeping \(self.value(of: key))")
        }
        settings[key.id] = Assignment(values: [value], source: source)
        return nil
    }

    private mutating func warn(_ message: String) -> String {
        warnings.append(message)
        return message
    }

    private mutating func read(file: String, required: Bool) {
        guard let data = FileManager.default.contents(atPath: file) else {
            if required || FileManager.default.fileExists(atPath: file) { warnings.append("\(file): cannot be read") }
            return
        }
        guard let text = String(data: data, encoding: .utf8) else {
            warnings.append("\(file): not valid UTF-8, ignored")
            return
        }
        files.append(file)
        parse(text, source: file)
    }

    /// The effective value of a single-valued key.
    public subscript(setting: Setting) -> String {
        let key = setting.key
        precondition(!key.repeatable, "\(key.id) is repeatable: use values(_:)")
        return value(of: key)
    }

    private func value(of key: ConfigKey) -> String { settings[key.id]?.values.last ?? key.defaultValue }

    /// All effective values of a repeatable key (its default is a space-separated list).
    public func values(_ setting: Setting) -> [String] {
        let key = setting.key
        precondition(key.repeatable, "\(key.id) is not repeatable: use its subscript")
        return settings[key.id]?.values ?? key.defaultValue.split(separator: " ").map(String.init)
    }

    /// Replaces a repeatable key's values (command-line overrides such as `--catalog`).
    public mutating func override(_ setting: Setting, values: [String], source: String) {
        let key = setting.key
        precondition(key.repeatable, "\(key.id) is not repeatable")
        settings[key.id] = Assignment(values: [], source: source)
        for value in values { set(key.id, value, source: source) }
    }

    /// Integer value of a validated integer key.
    public func int(_ setting: Setting) -> Int { Int(self[setting])! }

    /// Seconds value of a validated duration key.
    public func seconds(_ setting: Setting) -> Double { Double(self[setting])! }

    /// Whether a `yes`/`no` key is `yes`.
    public func flag(_ setting: Setting) -> Bool { self[setting] == "yes" }

    /// Every registered key with its default, effective values and where they came from.
    public var entries: [ConfigEntry] {
        ConfigRegistry.keys.map { key in
            let setting = settings[key.id]
            let value = setting.map { key.repeatable ? $0.values.joined(separator: " ") : $0.values.last ?? "" } ?? key.defaultValue
            return ConfigEntry(key: key.id, defaultValue: key.defaultValue, value: value, source: setting?.source ?? "default", doc: key.doc)
        }
    }

    /// Every client connection's channel: frame limits, output stall, handshake/frame and idle
    /// timeouts (`[Limits]`).
    public var channelOptions: FrameChannel.Options {
        let idle = seconds(.limitsIdleTimeoutSec)
        return FrameChannel.Options(limits: frameLimits, stallTimeout: seconds(.limitsOutputStallTimeoutSec),
                                    frameTimeout: seconds(.limitsHandshakeTimeoutSec), idleTimeout: idle > 0 ? idle : nil)
    }

    /// The frame limits clients get.
    public var frameLimits: FrameLimits {
        FrameLimits(maxHeaderBytes: int(.limitsMaxHeaderBytes), maxDataBytes: int(.limitsMaxDataBytes), maxPayloadBytes: int(.limitsMaxPayloadBytes))
    }
}
