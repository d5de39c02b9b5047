import Earshot
import EarshotCommandLine
import EarshotWire
import Foundation

let usage = """
    usage: earshotctl [--socket PATH] COMMAND [--json]
    commands:
      status    daemon version, uptime, connections and limits
      config    every config key with its default and effective value
    """

let invocation = CommandInvocation.parse(program: "earshotctl", usage: usage, valued: ["socket"], flags: ["json"])
let arguments = invocation.arguments
let command = invocation.command

do {
    let connection = try await DaemonConnection.connect(socket: arguments.value("socket"), appID: "org.earshot.earshotctl")
    defer { Task { await connection.close() } }
    switch command {
    case "status":
        let status = try await connection.status()
        if arguments.has("json") {
            Output.json(status)
        } else {
            StatusPrinter.print(status)
        }
    case "config":
        let report = try await connection.config()
        if arguments.has("json") {
            Output.json(report)
        } else {
            Output.table(["KEY", "DEFAULT", "EFFECTIVE", "SOURCE"],
                         report.entries.map { [$0.key, $0.defaultValue.isEmpty ? "(auto)" : $0.defaultValue, $0.value.isEmpty ? "(auto)" : $0.value, $0.source] })
            for warning in report.warnings { Output.note("warning: \(warning)") }
        }
    default:
        invocation.unknownCommand(program: "earshotctl", usage: usage)
    }
} catch {
    Output.error("earshotctl", "\(error)")
    exit(ExitCode.failure.rawValue)
}
