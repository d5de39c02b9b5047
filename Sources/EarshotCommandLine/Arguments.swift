import EarshotWire
import Foundation

/// A parsed command line: `--name value`, `--name=value`, boolean `--flag`s and positionals.
public struct Arguments: Sendable {
    /// Why the command line cannot be used.
    public enum ParseError: Error, CustomStringConvertible {
        case unknownOption(String)
        case missingValue(String)
        case unexpectedValue(String)

        public var description: String {
            switch self {
            case .unknownOption(let o): "unknown option \(o)"
            case .missingValue(let o): "option \(o) needs a value"
            case .unexpectedValue(let o): "option \(o) takes no value"
            }
        }
    }

    public private(set) var positional: [String] = []
    private var values: [String: [String]] = [:]
    private var flags: Set<String> = []

    /// Parses `arguments` (without the program name). `valued` options take a value, `flags` don't.
    public init(_ arguments: [String], valued: Set<String> = [], flags known: Set<String> = []) throws(ParseError) {
        var rest = arguments[...]
        while let argument = rest.popFirst() {
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

    /// Whether `--name` was given.
    public func has(_ name: String) -> Bool { flags.contains(name) }
}

/// The standard start of an Earshot CLI: parse, answer `--version` and `--help`, require a command.
public struct CommandInvocation: Sendable {
    public let arguments: Arguments
    /// The first positional argument.
    public let command: String

    /// Parses the process's arguments for `program`; prints usage and exits on anything unusable.
    public static func parse(program: String, usage: String, valued: Set<String>, flags: Set<String>) -> CommandInvocation {
        let arguments: Arguments
        do {
            arguments = try Arguments(Array(CommandLine.arguments.dropFirst()), valued: valued, flags: flags.union(["help", "version"]))
        } catch {
            Output.error(program, "\(error)\n\(usage)")
            exit(ExitCode.failure.rawValue)
        }
        if arguments.has("version") {
            print("\(program) \(EarshotVersion.string)")
            exit(ExitCode.success.rawValue)
        }
        guard let command = arguments.positional.first, !arguments.has("help") else {
            print(usage)
            exit(arguments.has("help") ? ExitCode.success.rawValue : ExitCode.failure.rawValue)
        }
        return CommandInvocation(arguments: arguments, command: command)
    }

    /// Reports an unknown command and exits.
    public func unknownCommand(program: String, usage: String) -> Never {
        Output.error(program, "unknown command '\(command)'\n\(usage)")
        exit(ExitCode.failure.rawValue)
    }
}

extension Optional {
    /// The value, or `error` thrown.
    public func orThrow(_ error: some Error) throws -> Wrapped {
        guard let self else { throw error }
        return self
    }
}
