import Earshot
import EarshotCommandLine
import EarshotWire
import Foundation

let usage = """
    usage: earshot [--socket PATH] COMMAND [--json]
    commands:
      status    show the Earshot daemon this user talks to (starts a user daemon if none answers)
    """

let invocation = CommandInvocation.parse(program: "earshot", usage: usage, valued: ["socket"], flags: ["json"])
let arguments = invocation.arguments
let command = invocation.command

/// Connects to a daemon, starting a user daemon when none answers.
func connect() async throws -> DaemonConnection {
    let appID = "org.earshot.earshot"
    do {
        return try await DaemonConnection.connect(socket: arguments.value("socket"), appID: appID)
    } catch EarshotError.noDaemon {
        Output.note("earshot: no daemon answers; starting earshotd --user (log: \(UserDaemon.logPath(environment: ProcessInfo.processInfo.environment)))")
        let path = try await UserDaemon.start(socket: arguments.value("socket"))
        return try await DaemonConnection.connect(socket: path, appID: appID)
    }
}

do {
    switch command {
    case "status":
        let connection = try await connect()
        let status = try await connection.status()
        await connection.close()
        if arguments.has("json") { Output.json(status) } else { StatusPrinter.print(status) }
    default:
        invocation.unknownCommand(program: "earshot", usage: usage)
    }
} catch {
    Output.error("earshot", "\(error)")
    exit(ExitCode.failure.rawValue)
}
