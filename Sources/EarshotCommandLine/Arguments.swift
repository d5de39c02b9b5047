import EarshotWire
import Foundation

/// A parsed command line: `--name value`, `--name=value`, boolean `--flag`s, short spellings of
/// long options (`-o` for `--output`) and positionals.
public struct Arguments: Sendable {
    /// Why the command line cannot be used.
    public enum ParseError: Error, CustomStringConvertible {
        case unknownOption(String)
        case missingValue(String)
        case unexpectedValue(String)
        /// An option the program knows that this command does not take (options are never ignored).
        case unsupportedOption(String, command: String)
        /// A value the option cannot take (`expected` says what it takes).
        case invalidValue(String, value: String, expected: String)

        public var description: String {
            switch self {
            case .unsupportedOption(let o, let command): "'\(command)' does not take \(o)"
            case .unknownOption(let o): "unknown option \(o)"
            case .missingValue(let o): "option \(o) needs a value"
            case .unexpectedValue(let o): "option \(o) takes no value"
            case .invalidValue(let o, let value, let expected): "option \(o) needs \(expected), not '\(value)'"
            }
        }
    }

    public private(set) var positional: [String] = []
    private var values: [String: [String]] = [:]
    private var flags: Set<String> = []

    /// Parses `arguments` (without the program name). `valued` options take a value, `flags` don't;
    /// `short` spells some of them with one letter (`"o": "output"` reads `-o` as `--output`).
    public init(_ arguments: [String], valued: Set<String> = [], flags known: Set<String> = [], short: [Character: String] = [:]) throws(ParseError) {
        var rest = arguments[...]
        while var argument = rest.popFirst() {
            if argument.count == 2, argument.hasPrefix("-"), let long = short[argument.last!] { argument = "--" + long }
            if argument == "--" {
                positional += rest
                break
            }
            guard argument.hasPrefix("--"), argument.count > 2 else {
                positional.append(argument)
                continue
            }
            var name = String(argument.dropFirst(2))
            var inline: String?
            if let eq = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            if valued.contains(name) {
                guard let value = inline ?? rest.popFirst() else { throw .missingValue("--\(name)") }
                values[name, default: []].append(value)
            } else if known.contains(name) {
                guard inline == nil else { throw .unexpectedValue("--\(name)") }
                flags.insert(name)
            } else {
                throw .unknownOption("--\(name)")
            }
        }
    }

    /// The last value given for `--name`.
    public func value(_ name: String) -> String? { values[name]?.last }

    /// Every value given for a repeatable `--name`.
    public func values(_ name: String) -> [String] { values[name] ?? [] }

    /// `--name` as a duration ≥ 0: a number of seconds with an optional unit, `ms`, `s`, `m` or
    /// `h` (`0`, `30s`, `1.5m`, `2h`); nil when absent. Anything else throws.
    public func duration(_ name: String) throws(ParseError) -> Duration? {
        guard let text = value(name) else { return nil }
        let units: [(suffix: String, seconds: Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600)]
        let unit = units.first { text.hasSuffix($0.suffix) } ?? ("", 1)
        let number = text.dropLast(unit.suffix.count)
        guard number.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }), let value = Double(number), value.isFinite, value * unit.seconds <= 1e9 else {
            throw .invalidValue("--\(name)", value: text, expected: "a duration such as 0, 30s, 5m or 1h")
        }
        return .milliseconds((value * unit.seconds * 1000).rounded())
    }

    /// Whether `--name` was given.
    public func has(_ name: String) -> Bool { flags.contains(name) }

    /// Throws for the first option given that `command` does not take (`allowed`, without `--`).
    public func check(only allowed: Set<String>, for command: String) throws(ParseError) {
        if let extra = (Set(values.keys).union(flags)).subtracting(allowed).sorted().first { throw .unsupportedOption("--\(extra)", command: command) }
    }
}

/// A mistake on the command line, found before anything is sent to a daemon: the CLI prints it
/// with its usage and exits with ``ExitCode/usage``.
public struct UsageError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
    /// A parse or option problem, or any other error a check of the command line threw.
    public init(_ error: any Error) { description = "\(error)" }
}

/// The standard start of an Earshot CLI: parse, answer `--version` and `--help`, require a command.
public struct CommandInvocation: Sendable {
    public let arguments: Arguments
    /// The first positional argument.
    public let command: String

    /// What a program asks to be printed instead of running a command.
    public enum Answer: Error, Sendable {
        /// `--help`, or no command: the usage (exit 0 for `--help`, else a usage error).
        case usage(requested: Bool)
        /// `--version`.
        case version
    }

    /// Parses `argv` (without the program name); throws ``UsageError`` on anything unusable and
    /// ``Answer`` for `--help`, `--version` or a missing command.
    public static func parse(_ argv: [String], valued: Set<String>, flags: Set<String>, short: [Character: String] = [:]) throws -> CommandInvocation {
        // `--version` alone answers even where a command takes a `--version N` of its own.
        if argv == ["--version"] { throw Answer.version }
        let arguments: Arguments
        do {
            arguments = try Arguments(argv, valued: valued, flags: flags.union(["help", "version"]), short: short)
        } catch {
            throw UsageError(error)
        }
        if arguments.has("version") { throw Answer.version }
        guard let command = arguments.positional.first, !arguments.has("help") else { throw Answer.usage(requested: arguments.has("help")) }
        return CommandInvocation(arguments: arguments, command: command)
    }

    /// Throws unless every option given is one `command` takes (`allowed`, plus `common`, which
    /// every command takes).
    public func require(only allowed: Set<String>, common: Set<String>) throws(UsageError) {
        do {
            try arguments.check(only: allowed.union(common), for: command)
        } catch {
            throw UsageError(error)
        }
    }

    /// The error for a command the program does not have.
    public var unknownCommand: UsageError { UsageError("unknown command '\(command)'") }

    /// The `index`th positional argument after the command, or a usage error saying what it is.
    public func operand(_ index: Int = 1, _ what: String) throws(UsageError) -> String {
        guard arguments.positional.count > index else { throw UsageError("'\(command)' needs \(what)") }
        return arguments.positional[index]
    }
}

/// How an Earshot CLI ends: runs `body` and turns what it threw into the message and exit status
/// every CLI uses — a usage error (64) pointing to `--help`, anything else as `program: error` (1).
public enum CommandLineProgram {
    public static func run(_ program: String, usage: String, _ body: () async throws -> ExitCode) async -> Int32 {
        do {
            return try await body().rawValue
        } catch let answer as CommandInvocation.Answer {
            switch answer {
            case .version: print("\(program) \(EarshotVersion.string)")
            case .usage(let requested):
                if requested { print(usage) } else { Output.error(program, "no command given\n\(usage)") }
                return requested ? ExitCode.success.rawValue : ExitCode.usage.rawValue
            }
            return ExitCode.success.rawValue
        } catch let error as UsageError {
            Output.error(program, "\(error) (\(program) --help lists the commands and their options)")
            return ExitCode.usage.rawValue
        } catch {
            Output.error(program, "\(error)")
            return ExitCode.failure.rawValue
        }
    }
}

extension Optional {
    /// The value, or `error` thrown.
    public func orThrow(_ error: some Error) throws -> Wrapped {
        guard let self else { throw error }
        return self
    }
}
