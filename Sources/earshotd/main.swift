import EarshotCommandLine
import EarshotDaemon
import EarshotWire
import Foundation

let usage = """
    usage: earshotd [--user] [--socket PATH] [--state-dir DIR] [--cache-dir DIR] [--config FILE]
                    [--catalog URL]... [--keys-dir DIR]...
           earshotd --version | --config-template
    """

let arguments: Arguments
do {
    arguments = try Arguments(Array(CommandLine.arguments.dropFirst()),
                              valued: ["socket", "state-dir", "cache-dir", "config", "catalog", "keys-dir"], flags: ["user", "version", "help", "config-template"])
} catch {
    Output.error("earshotd", "\(error)\n\(usage)")
    exit(ExitCode.failure.rawValue)
}
if arguments.has("help") {
    print(usage)
    exit(ExitCode.success.rawValue)
}
if arguments.has("config-template") {
    print(ConfigRegistry.template, terminator: "")
    exit(ExitCode.success.rawValue)
}
if arguments.has("version") {
    print("earshotd \(EarshotVersion.string) (protocol \(WireProtocol.earshotVersion), Wyoming \(WireProtocol.wyomingVersion))")
    Output.table(["library", "version"], Daemon.linkedLibraries.map { [$0.name, $0.version] })
    exit(ExitCode.success.rawValue)
}
if !arguments.positional.isEmpty {
    Output.error("earshotd", "unexpected argument \(arguments.positional[0])\n\(usage)")
    exit(ExitCode.failure.rawValue)
}

var options = DaemonOptions()
options.socket = arguments.value("socket")
options.stateDirectory = arguments.value("state-dir")
options.cacheDirectory = arguments.value("cache-dir")
options.configFile = arguments.value("config")
options.userMode = arguments.has("user")
options.catalogURLs = arguments.values("catalog")
options.keyDirectories = arguments.values("keys-dir")
let status = await Daemon(options: options).run()
// Sessions cancelled at the shutdown deadline may still be inside an engine call on their own
// threads; exit(3) would run C++ static destructors (ONNX Runtime's schema registry) under them and
// abort. Everything the daemon owns is closed and its log flushed by now: leave without them.
fflush(nil) // every C stdio stream
_exit(status)
