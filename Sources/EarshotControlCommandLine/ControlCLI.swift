import Earshot
import EarshotClientCommandLine
import EarshotCommandLine
import EarshotWire
import Foundation

/// `earshotctl`, the admin CLI: its executable only calls ``main(_:)``.
public enum ControlCLI {
    public static let usage = """
        usage: earshotctl [--socket PATH] COMMAND [OPTIONS] [--json]
        commands:
          status                                   daemon version, uptime, connections and limits; for admins every
                                                   installed asset's installed, available, held and previous version
                                                   and the last update run
          config                                   every config key with its default and effective value
          catalog [show|refresh]                   the merged catalog and its sources (refresh: fetch and verify now)
          catalog add-asset URL --id ID --kind KIND --engine ENGINE [--locale L]... [--license SPDX]
                  [--format FMT] [--role ROLE=PATH]... [--version N] [--catalog FILE]
                                                   download URL, hash it, inspect the archive and print (or merge into
                                                   the unsigned catalog FILE) an entry for an admin to sign with minisign
          assets                                   installed assets and running install jobs
          reservations [--all]                     reservations (--all: every client's)
          language-models [--all]                  prepared custom language models of this user's apps (--all: every user's)
          release --locale L [--uid U] [--app A]   release a reservation (another client's: admin)
          install --locale L [--module KIND] [--preset NAME] [--dry-run]
                                                   install what a module needs (exit 2: already installed; --dry-run:
                                                   list each asset and version it would fetch, bytes and space needed;
                                                   fetch, reserve and change nothing)
          cancel ASSET                             stop an asset's install; the partial download is kept
          rollback ASSET                           make the version the last update replaced current again (kept for
                                                   [Assets] KeepPreviousForSec); later updates install only newer ones
          hold ASSET / unhold ASSET                pin an asset at its installed version: updates (the timer's and
                                                   manual ones) skip it and rollback refuses it; unhold releases the pin
                                                   (exit 2: already held / not held)
          gc [--dry-run]                           garbage-collect now; report what is (or would be) freed
          update [--dry-run] [--timer]             refresh catalogs and update installed assets, skipping held ones
                                                   (--dry-run: fetch and verify catalogs, list each asset from → to,
                                                   bytes to fetch, space needed and what GC would free, and held ones;
                                                   change nothing. --timer: log the changes as "by timer" instead of
                                                   "by uid N", as earshot-update.service does; a label, it grants
                                                   nothing). Killing the client does not stop the update: the daemon
                                                   finishes it and a later run joins it
          publish oci://HOST[:PORT]/REPOSITORY:TAG [--catalog SOURCE] [--asset ID]... [--dry-run]
                                                   copy the verified catalog (signed, unchanged) and every asset it lists
                                                   (or only --asset ones) into a registry: blobs it has are skipped, the
                                                   manifest is written last (--dry-run: say what would be uploaded;
                                                   --catalog: which source, when several have a catalog). Docs/FLEET.md
          stats                                    analysis sessions by engine, loaded models with their memory, and every
                                                   counter of GET /metrics (the same numbers)
        an option a command does not take is an error (exit 64, nothing is sent to the daemon).
        exit status: 0 done (something changed), 1 needs an admin (an error, a refused signature or rollback,
          a bad hash, no disk space), 2 nothing to do (update: nothing newer, or no source reachable: a
          warning says why and the next run tries again), 64 the command line is wrong
        """

    /// The options each command takes besides `--socket` and `--json`: any other is an error, never ignored.
    static let commandOptions: [String: Set<String>] = [
        "status": [], "config": [], "assets": [], "stats": [], "cancel": [], "rollback": [], "hold": [], "unhold": [],
        "catalog": [], "reservations": ["all"], "language-models": ["all"], "release": ["locale", "uid", "app"],
        "install": ["locale", "module", "preset", "dry-run"], "gc": ["dry-run"], "update": ["dry-run", "timer"],
        "publish": ["catalog", "asset", "dry-run"],
    ]
    /// `catalog add-asset`'s options.
    static let addAssetOptions: Set<String> = ["id", "kind", "engine", "locale", "license", "format", "role", "version", "catalog"]

    /// Runs `earshotctl` with `argv` (the arguments after the program name); returns its exit
    /// status. The whole command line is checked before the daemon is contacted.
    public static func main(_ argv: [String]) async -> Int32 {
        await CommandLineProgram.run("earshotctl", usage: usage) {
            let invocation = try CommandInvocation.parse(argv, valued: ["socket", "locale", "module", "preset", "uid", "app", "id", "kind", "engine", "license", "format",
                                                                        "role", "version", "catalog", "asset"],
                                                         flags: ["json", "all", "dry-run", "timer"])
            let command = try ControlCommand(invocation)
            if case .addAsset(let addAsset) = command.operation { return try await addAsset.run() } // talks to no daemon
            return try await command.run()
        }
    }
}

/// One `earshotctl` command, with its operands checked.
struct ControlCommand {
    enum Operation {
        case status, config, assets, stats
        case catalog(refresh: Bool)
        case addAsset(AddAssetCommand)
        case reservations(all: Bool)
        case languageModels(all: Bool)
        case release(locale: String, uid: UInt32?, app: String?)
        case install([ModuleConfiguration], dryRun: Bool)
        case cancel(String)
        case rollback(String)
        case hold(String, Bool)
        case gc(dryRun: Bool)
        case update(dryRun: Bool, timer: Bool)
        case publish(PublishCommand)
    }

    let operation: Operation
    let socket: String?
    let json: Bool

    init(_ invocation: CommandInvocation) throws(UsageError) {
        let arguments = invocation.arguments
        socket = arguments.value("socket")
        json = arguments.has("json")
        let subcommand = arguments.positional.count > 1 ? arguments.positional[1] : nil
        guard let allowed = ControlCLI.commandOptions[invocation.command] else { throw invocation.unknownCommand }
        let isAddAsset = invocation.command == "catalog" && subcommand == "add-asset"
        try invocation.require(only: isAddAsset ? ControlCLI.addAssetOptions : allowed, common: ["socket", "json"])
        switch invocation.command {
        case "status": operation = .status
        case "config": operation = .config
        case "assets": operation = .assets
        case "stats": operation = .stats
        case "catalog":
            switch subcommand {
            case nil, "show": operation = .catalog(refresh: false)
            case "refresh": operation = .catalog(refresh: true)
            case "add-asset": operation = .addAsset(try AddAssetCommand(arguments))
            case let other?: throw UsageError("unknown catalog command '\(other)' (show, refresh, add-asset)")
            }
        case "reservations": operation = .reservations(all: arguments.has("all"))
        case "language-models": operation = .languageModels(all: arguments.has("all"))
        case "release":
            guard let locale = arguments.value("locale") else { throw UsageError(ModuleArguments.Problem.missingLocale) }
            let uid = try arguments.value("uid").map { text throws(UsageError) in
                guard let uid = UInt32(text) else { throw UsageError("--uid needs a number, not '\(text)'") }
                return uid
            }
            operation = .release(locale: locale, uid: uid, app: arguments.value("app"))
        case "install":
            do {
                operation = .install(try ModuleArguments.candidates(arguments), dryRun: arguments.has("dry-run"))
            } catch {
                throw UsageError(error)
            }
        case "cancel": operation = .cancel(try invocation.operand(1, "an asset id, e.g. earshotctl cancel whisper-base"))
        case "rollback": operation = .rollback(try invocation.operand(1, "an asset id, e.g. earshotctl rollback whisper-base"))
        case "hold", "unhold": operation = .hold(try invocation.operand(1, "an asset id, e.g. earshotctl \(invocation.command) whisper-base"), invocation.command == "hold")
        case "gc": operation = .gc(dryRun: arguments.has("dry-run"))
        case "update": operation = .update(dryRun: arguments.has("dry-run"), timer: arguments.has("timer"))
        case "publish": operation = .publish(try PublishCommand(arguments, target: try invocation.operand(1, "a registry tag, e.g. earshotctl publish oci://registry.example:5000/earshot/catalog:v1")))
        default: throw invocation.unknownCommand
        }
    }

    /// `yes`, `no`, or the older version installed (an update is due); `held` when pinned.
    static func installedColumn(_ asset: CatalogAssetInfo) -> String {
        let installed = asset.installed ? "yes" : asset.installedVersion.map { "version \($0) (older)" } ?? "no"
        return asset.heldVersion.map { "\(installed), held at \($0)" } ?? installed
    }

    func run() async throws -> ExitCode {
        let connection = try await DaemonConnection.connect(socket: socket, appID: "org.earshot.earshotctl")
        var code = ExitCode.success
        switch operation {
        case .status:
            let status = try await connection.status()
            if json { Output.json(status) } else { StatusPrinter.print(status) }
        case .config:
            let report = try await connection.config()
            if json {
                Output.json(report)
            } else {
                Output.table(["KEY", "DEFAULT", "EFFECTIVE", "SOURCE"],
                             report.entries.map { [$0.key, $0.defaultValue.isEmpty ? "(auto)" : $0.defaultValue, $0.value.isEmpty ? "(auto)" : $0.value, $0.source] })
                for warning in report.warnings { Output.note("warning: \(warning)") }
            }
        case .catalog(let refresh):
            let reply = try await connection.request(CatalogRequest(refresh: refresh), expecting: CatalogReply.self)
            if json {
                Output.json(reply)
            } else {
                Output.table(["SOURCE", "VERSION", "KEY", "REFRESH"], reply.sources.map { [$0.url, $0.version.map(String.init) ?? "-", $0.keyId ?? "-", [$0.outcome, $0.message].compactMap { $0 }.joined(separator: ": ")] })
                print("")
                Output.table(["ASSET", "VERSION", "KIND", "ENGINE", "LOCALES", "SIZE", "INSTALLED"],
                             reply.assets.map { [$0.id, "\($0.version)", $0.kind.rawValue, $0.engine, $0.locales.joined(separator: ","), ProgressDisplay.bytes($0.size), Self.installedColumn($0)] })
            }
            if reply.sources.contains(where: { $0.outcome == "failed" }) { code = .failure }
        case .assets:
            let reply = try await connection.request(AssetsRequest(), expecting: AssetsReply.self)
            if json {
                Output.json(reply)
            } else {
                Output.table(["ASSET", "VERSION", "KIND", "LOCALES", "SIZE", "STATE"], reply.assets.map { asset in
                    let state = [asset.current ? "current" : "superseded", asset.leased ? "in use" : nil, asset.reserved ? "reserved" : "unreserved"].compactMap { $0 }.joined(separator: ", ")
                    return [asset.id, "\(asset.version)", asset.kind.rawValue, asset.locales.joined(separator: ","), ProgressDisplay.bytes(asset.bytes), state]
                })
                for job in reply.jobs { print("installing \(job.asset)@\(job.version)") }
            }
        case .reservations(let all):
            ReservationPrinter.print(try await connection.request(ReservationsRequest(all: all), expecting: ReservationsReply.self), json: json, showOwner: all)
        case .languageModels(let all):
            LanguageModelPrinter.print(try await connection.request(LanguageModelsRequest(all: all), expecting: LanguageModelsReply.self), json: json, showOwner: all)
        case .release(let locale, let uid, let app):
            let reply = try await connection.request(ReleaseRequest(locale: locale, uid: uid, appId: app), expecting: ReleaseReply.self)
            if json { Output.json(reply) } else { print(reply.released ? "released" : "no such reservation") }
            code = reply.released ? .success : .nothingToDo
        case .install(let candidates, dryRun: true):
            code = try await InstallCommand.plan(connection, candidates: candidates, json: json)
        case .install(let candidates, dryRun: false):
            code = try await InstallCommand.run(connection, candidates: candidates, json: json)
        case .cancel(let asset):
            let reply = try await connection.request(CancelInstallRequest(asset: asset), expecting: CancelInstallReply.self)
            if json { Output.json(reply) } else { print(reply.cancelled ? "cancelled the install of \(asset)" : "no install of \(asset) is running") }
            code = reply.cancelled ? .success : .nothingToDo
        case .rollback(let asset):
            let reply = try await connection.request(RollbackRequest(asset: asset), expecting: RollbackReply.self)
            if json { Output.json(reply) } else { print("rolled back \(reply.asset) \(reply.fromVersion) → \(reply.toVersion)") }
        case .hold(let asset, let hold):
            let reply = try await connection.request(HoldRequest(asset: asset, hold: hold), expecting: HoldReply.self)
            if json {
                Output.json(reply)
            } else if reply.held {
                print(reply.changed ? "held \(asset) at version \(reply.version ?? 0): updates skip it" : "\(asset) is already held at version \(reply.version ?? 0)")
            } else {
                print(reply.changed ? "released the hold on \(asset) (version \(reply.version ?? 0)): the next update may replace it" : "\(asset) is not held")
            }
            code = reply.changed ? .success : .nothingToDo
        case .gc(let dryRun):
            let reply = try await connection.request(GCRequest(dryRun: dryRun), expecting: GCReply.self)
            if json {
                Output.json(reply)
            } else {
                for removal in reply.removed { print("\(reply.dryRun ? "would remove" : "removed") \(removal.asset) (\(ProgressDisplay.bytes(removal.bytes)), \(removal.reason))") }
                for r in reply.expiredReservations { print("expired reservation \(r.uid)/\(r.appId) \(r.locale)") }
                print("\(reply.dryRun ? "would free" : "freed") \(ProgressDisplay.bytes(reply.freedBytes))")
            }
            code = reply.removed.isEmpty && reply.expiredReservations.isEmpty ? .nothingToDo : .success
        case .stats:
            let reply = try await connection.request(StatsRequest(), expecting: StatsReply.self)
            if json {
                Output.json(reply)
            } else {
                let engines = (reply.sessionsByEngine ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
                Output.fields([("sessions", "\(reply.sessions)" + (engines.isEmpty ? "" : " (\(engines.joined(separator: ", ")))")), ("model loads", "\(reply.modelLoads) since start"),
                               ("spare voice detectors", "\(reply.spareDetectors ?? 0)"),
                               ("resident memory", ProgressDisplay.bytes(Int64(reply.residentBytes)))]
                              + [("  anonymous (heap)", reply.anonymousBytes), ("  file-backed", reply.fileBytes)].compactMap { name, bytes in
                                  bytes.map { (name, ProgressDisplay.bytes(Int64($0))) }
                              }
                              + [("engine process", reply.engineProcess.map {
                                  "pid \($0.pid), anonymous \(ProgressDisplay.bytes(Int64($0.anonymousBytes))), file-backed \(ProgressDisplay.bytes(Int64($0.fileBytes)))"
                              } ?? "not running (no Whisper model or voice detector loaded)")])
                if !reply.models.isEmpty {
                    print("")
                    Output.table(["MODEL", "SESSIONS", "MEMORY"], reply.models.map { [$0.key, "\($0.users)", ProgressDisplay.bytes(Int64($0.memoryBytes))] })
                }
                if let metrics = reply.metrics, !metrics.isEmpty {
                    print("")
                    Output.table(["METRIC", "LABELS", "VALUE"], metrics.map { sample in
                        let labels = sample.labels.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
                        let number = sample.value == sample.value.rounded() && abs(sample.value) < 1e15 ? "\(Int64(sample.value))" : String(format: "%.3f", sample.value)
                        let value = sample.count.map { "\($0) observed, sum \(number)" } ?? number
                        return [sample.name, labels.isEmpty ? "-" : labels, value]
                    })
                }
            }
        case .update(let dryRun, let timer):
            let display = ProgressDisplay()
            let reply = try await connection.request(UpdateRequest(dryRun: dryRun, timer: timer), expecting: UpdateReply.self) { frame in
                if !json, let event = try? frame.decode(InstallProgress.self) { display.show(event) }
            }
            display.finish()
            if json {
                Output.json(reply)
            } else {
                for source in reply.catalogs { print("catalog \(source.url): \(source.outcome ?? "?")\(source.message.map { " (\($0))" } ?? "")") }
                if reply.dryRun {
                    for item in reply.planned {
                        print("would update \(item.asset) \(item.fromVersion) → \(item.toVersion): fetch \(ProgressDisplay.bytes(item.downloadBytes)), "
                              + "needs \(ProgressDisplay.bytes(item.spaceNeeded)), frees \(ProgressDisplay.bytes(item.frees)) after")
                    }
                }
                for item in reply.held { print("held \(item.asset) at \(item.fromVersion): \(reply.dryRun ? "would skip" : "skipped") \(item.toVersion)") }
                for line in reply.updated { print("updated \(line)") }
                for line in reply.failed { Output.note("failed: \(line)") }
                for line in reply.deferred { Output.note("warning: \(line); the next run tries again") }
                for source in reply.catalogs where source.outcome == "unreachable" { Output.note("warning: catalog \(source.url) unreachable; the next run tries again") }
                if !reply.changed { print(reply.dryRun ? "nothing would change" : "nothing to update") }
            }
            code = ExitCode(update: reply)
        case .publish(let publish):
            code = try await publish.run(connection, json: json)
        case .addAsset:
            break
        }
        await connection.close()
        return code
    }
}
