import Earshot
import EarshotCommandLine
import EarshotWire
import Foundation

/// `earshot`, the user CLI: its executable only calls ``main(_:)``.
public enum UserCLI {
    public static let usage = """
        usage: earshot [--socket PATH] COMMAND [OPTIONS] [--json]
        commands:
          status                                  the daemon this user talks to (starts a user daemon if none answers)
          locales [--module KIND] [--installed]   supported (or installed) locales; KIND: transcriber, dictation, detector
          install --locale L [--module KIND] [--preset NAME]
                                                  install what a module needs (reserving the locale), with progress
                                                  (exit 2: already installed); NAME: an Apple preset, e.g.
                                                  progressiveTranscription, which the catalog may serve with another model
          reservations                            this app's reserved locales
          reserve L | release L                   reserve or release a locale
          transcribe FILE... [--locale L|auto] [--module KIND] [--translate] [--keep-alive D] [--json|--srt|--vtt]
                     [--prompt TEXT] [--context PHRASE]... [--beam N] [--temperature T] [--lm HANDLE]
                                                  transcribe audio and video files (what libsndfile or FFmpeg reads:
                                                  WAV, FLAC, Ogg, MP3, m4a, mp4, webm, …); installs
                                                  the model if needed, preferring a transcriber over dictation;
                                                  --locale auto identifies the language of each segment,
                                                  --translate gives English text (multilingual models);
                                                  the model stays loaded for the daemon's LingerSeconds after
                                                  the call, or for --keep-alive D (0, 30s, 5m, 1h; 0: unload
                                                  it now), at most the daemon's MaxKeepAliveSec;
                                                  Whisper: --prompt TEXT conditions every decode
                                                  (names, spellings, style; its last 223 tokens), each
                                                  --context PHRASE joins the prompt and biases the search
                                                  towards it, --beam N (1-16; the daemon's BeamSize) and
                                                  --temperature T (0-1; 0 searches, falling back to higher
                                                  temperatures only when a result fails Whisper's checks);
                                                  --lm HANDLE: a prepared custom language model (dictation
                                                  interpolates it; Whisper takes its phrases as context)
          transcribe --live [--rate HZ] [--channels N]
                                                  transcribe raw s16le PCM from stdin as it arrives
          transcribe --mic [--device SOURCE]      transcribe the microphone (PulseAudio/PipeWire source;
                                                  volatile text in place on a terminal; Ctrl-C finalizes)
          lm build DATA.json -o FILE.bin          custom language model data (Apple's SFCustomLanguageModelData DSL as
                                                  JSON: locale, identifier, version, phrases, templateGroups,
                                                  pronunciations; Docs/CUSTOM_LANGUAGE_MODELS.md) checked and written
          lm prepare FILE.bin [--handle PATH] [--ignore-cache]
                                                  have the daemon prepare it for earshot; writes the handle
                                                  (default: FILE.handle) that transcribe --lm takes
          lm list                                 this user's prepared custom language models
          devices                                 the sound server's sources (name, description, default,
                                                  monitor), the SOURCE names --device takes; needs no daemon
        """

    /// The options each command takes besides `--socket` and `--json`: any other is an error, never ignored.
    static let commandOptions: [String: Set<String>] = [
        "status": [], "reservations": [], "reserve": [], "release": [], "devices": [],
        "locales": ["module", "installed"], "install": ["locale", "module", "preset"],
        "transcribe": ["locale", "module", "translate", "keep-alive", "srt", "vtt", "live", "rate", "channels", "mic", "device", "prompt", "context", "beam", "temperature", "lm"],
        "lm": ["output", "handle", "ignore-cache"],
    ]

    /// Runs `earshot` with `argv` (the arguments after the program name); returns its exit status.
    /// The whole command line is checked before a daemon is contacted (or started).
    public static func main(_ argv: [String]) async -> Int32 {
        await CommandLineProgram.run("earshot", usage: usage) {
            let invocation = try CommandInvocation.parse(argv, valued: ["socket", "locale", "module", "preset", "rate", "channels", "device", "keep-alive", "prompt", "context",
                                                                        "beam", "temperature", "lm", "output", "handle"],
                                                         flags: ["json", "installed", "srt", "vtt", "live", "mic", "translate", "ignore-cache"], short: ["o": "output"])
            guard let allowed = commandOptions[invocation.command] else { throw invocation.unknownCommand }
            try invocation.require(only: allowed, common: ["socket", "json"])
            let command = try UserCommand(invocation)
            return try await command.run(socket: invocation.arguments.value("socket"), json: invocation.arguments.has("json"))
        }
    }
}

/// One `earshot` command, with its operands checked.
enum UserCommand {
    case status
    case locales(AssetKind, installed: Bool)
    case install([ModuleConfiguration])
    case transcribe(TranscribeCommand)
    case languageModel(Arguments)
    case reservations
    case reserve(locale: String)
    case release(locale: String)
    case devices

    init(_ invocation: CommandInvocation) throws(UsageError) {
        let arguments = invocation.arguments
        switch invocation.command {
        case "status": self = .status
        case "locales":
            let name = arguments.value("module") ?? "transcriber"
            guard let kind = AssetKind(rawValue: name) else { throw UsageError(ModuleArguments.Problem.unknownModule(name)) }
            self = .locales(kind, installed: arguments.has("installed"))
        case "install":
            do {
                self = .install(try ModuleArguments.candidates(arguments))
            } catch {
                throw UsageError(error)
            }
        case "transcribe": self = .transcribe(try TranscribeCommand(arguments))
        case "lm": self = .languageModel(arguments)
        case "reservations": self = .reservations
        case "reserve", "release":
            guard arguments.positional.count == 2 else { throw UsageError("\(invocation.command) needs one locale, e.g. earshot \(invocation.command) en-US") }
            self = invocation.command == "reserve" ? .reserve(locale: arguments.positional[1]) : .release(locale: arguments.positional[1])
        case "devices": self = .devices
        default: throw invocation.unknownCommand
        }
    }

    /// The app id `earshot` introduces itself as.
    static let appID = LanguageModelCommand.appIdentity

    /// Connects to a daemon, starting a user daemon when none answers.
    static func connect(socket: String?) async throws -> DaemonConnection {
        do {
            return try await DaemonConnection.connect(socket: socket, appID: appID)
        } catch EarshotError.noDaemon {
            Output.note("earshot: no daemon answers; starting earshotd --user (log: \(UserDaemon.logPath(environment: ProcessInfo.processInfo.environment)))")
            let path = try await UserDaemon.start(socket: socket)
            return try await DaemonConnection.connect(socket: path, appID: appID)
        }
    }

    func run(socket: String?, json: Bool) async throws -> ExitCode {
        if case .devices = self {
            try await DevicesCommand.run(json: json)
            return .success
        }
        let connection = try await Self.connect(socket: socket)
        var code = ExitCode.success
        switch self {
        case .status:
            let status = try await connection.status()
            if json { Output.json(status) } else { StatusPrinter.print(status) }
        case .locales(let kind, let installed):
            let reply = try await connection.request(LocalesRequest(kind: kind, installed: installed), expecting: LocalesReply.self)
            if json { Output.json(reply) } else { reply.locales.forEach { print($0) } }
        case .install(let candidates):
            code = try await InstallCommand.run(connection, candidates: candidates, json: json)
        case .transcribe(let command):
            // The analyzer uses this connection: one hello for the whole command.
            await EarshotService.shared.adopt(connection, appID: Self.appID)
            code = try await command.run(connection: connection)
        case .languageModel(let arguments):
            code = try await LanguageModelCommand.run(arguments, connection: { connection }, json: json)
        case .reservations:
            ReservationPrinter.print(try await connection.request(ReservationsRequest(), expecting: ReservationsReply.self), json: json, showOwner: false)
        case .reserve(let locale):
            let reply = try await connection.request(ReserveRequest(locale: locale), expecting: ReserveReply.self)
            if json { Output.json(reply) } else { print(reply.created ? "reserved" : "already reserved") }
            code = reply.created ? .success : .nothingToDo
        case .release(let locale):
            let reply = try await connection.request(ReleaseRequest(locale: locale), expecting: ReleaseReply.self)
            if json { Output.json(reply) } else { print(reply.released ? "released" : "not reserved") }
            code = reply.released ? .success : .nothingToDo
        case .devices:
            break
        }
        await connection.close()
        return code
    }
}
