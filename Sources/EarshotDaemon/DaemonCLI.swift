import EarshotCommandLine
import EarshotWire
import Foundation

/// `earshotd`'s command line: its executable only calls ``main(_:)``.
public enum DaemonCLI {
    public static let usage = """
        usage: earshotd [--user] [--socket PATH] [--state-dir DIR] [--cache-dir DIR] [--config FILE]
                        [--catalog URL]... [--keys-dir DIR]...
               earshotd --version | --config-template
        """

    /// Runs the daemon as `argv` (the arguments after the program name) asks, until SIGTERM or
    /// SIGINT; returns its exit status (64: the command line is wrong).
    public static func main(_ argv: [String]) async -> Int32 {
        await CommandLineProgram.run("earshotd", usage: usage) {
            let arguments: Arguments
            do {
                arguments = try Arguments(argv, valued: ["socket", "state-dir", "cache-dir", "config", "catalog", "keys-dir"],
                                          flags: ["user", "version", "help", "config-template"])
            } catch {
                throw UsageError(error)
            }
            if arguments.has("help") {
                print(usage)
                return .success
            }
            if arguments.has("config-template") {
                print(ConfigRegistry.template, terminator: "")
                return .success
            }
            if arguments.has("version") {
                print("earshotd \(EarshotVersion.string) (protocol \(WireProtocol.earshotVersion), Wyoming \(WireProtocol.wyomingVersion))")
                Output.table(["library", "version"], Daemon.linkedLibraries.map { [$0.name, $0.version] })
                return .success
            }
            if let extra = arguments.positional.first { throw UsageError("unexpected argument \(extra)") }
            var options = DaemonOptions()
            options.socket = arguments.value("socket")
            options.stateDirectory = arguments.value("state-dir")
            options.cacheDirectory = arguments.value("cache-dir")
            options.configFile = arguments.value("config")
            options.userMode = arguments.has("user")
            options.catalogURLs = arguments.values("catalog")
            options.keyDirectories = arguments.values("keys-dir")
            return ExitCode(rawValue: await Daemon(options: options).run()) ?? .failure
        }
    }
}
