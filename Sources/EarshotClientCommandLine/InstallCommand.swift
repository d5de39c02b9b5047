import Earshot
import EarshotCommandLine
import EarshotWire

/// `install --locale L [--module kind]`, shared by `earshot` and `earshotctl`.
public enum InstallCommand {
    /// Installs the first candidate module the daemon supports, with progress on stderr. Returns
    /// `.nothingToDo` when it was installed already.
    public static func run(_ connection: DaemonConnection, candidates: [ModuleConfiguration], json: Bool, quiet: Bool = false) async throws -> ExitCode {
        let module = try await supported(connection, candidates)
        let display = ProgressDisplay()
        let reply = try await connection.request(InstallRequest(modules: [module]), expecting: InstallReply.self) { frame in
            if !json || quiet, let event = try? frame.decode(InstallProgress.self) { display.show(event) }
        }
        display.finish()
        if quiet {
            // The caller reports; progress went to stderr.
        } else if json {
            Output.json(reply)
        } else if reply.nothingToDo {
            print("\(module.kind.rawValue) for \(module.locale ?? "any locale") is already installed")
        } else {
            print("installed \(reply.installed.joined(separator: ", ")) for \([module.kind.rawValue, module.locale].compactMap { $0 }.joined(separator: " "))")
            if !reply.reserved.isEmpty { print("reserved \(reply.reserved.joined(separator: ", "))") }
        }
        return reply.nothingToDo ? .nothingToDo : .success
    }

    /// `install --dry-run`: lists what installing the first supported candidate would fetch (asset,
    /// version, bytes, space needed) and changes nothing. `.nothingToDo` when all is installed.
    public static func plan(_ connection: DaemonConnection, candidates: [ModuleConfiguration], json: Bool) async throws -> ExitCode {
        let module = try await supported(connection, candidates)
        let reply = try await connection.request(InstallPlanRequest(modules: [module]), expecting: InstallPlanReply.self)
        if json {
            Output.json(reply)
        } else if reply.planned.isEmpty {
            print("\(module.kind.rawValue) for \(module.locale ?? "any locale") is already installed; nothing would change")
        } else {
            for item in reply.planned {
                print("would install \(item.asset) version \(item.version): fetch \(ProgressDisplay.bytes(item.downloadBytes)), needs \(ProgressDisplay.bytes(item.spaceNeeded))")
            }
            print("free in the asset store: \(ProgressDisplay.bytes(reply.availableBytes))")
        }
        return reply.planned.isEmpty ? .nothingToDo : .success
    }

    /// The first of `candidates` the daemon supports.
    private static func supported(_ connection: DaemonConnection, _ candidates: [ModuleConfiguration]) async throws -> ModuleConfiguration {
        let statuses = try await connection.request(ModuleStatusRequest(modules: candidates), expecting: ModuleStatusReply.self).modules
        guard let index = statuses.firstIndex(where: { $0 != .unsupported }) else {
            let locale = candidates.first?.locale ?? "-"
            throw EarshotError.daemon(WireError(.unsupportedLocale, "no catalog asset supports \(candidates.map(\.kind.rawValue).joined(separator: " or ")) for locale \(locale)"))
        }
        return candidates[index]
    }
}
