import Earshot
import EarshotClientCommandLine
import EarshotCommandLine
import EarshotWire
import Foundation

let usage = """
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

let invocation = CommandInvocation.parse(program: "earshot", usage: usage, valued: ["socket", "locale", "module", "preset", "rate", "channels", "device", "keep-alive", "prompt", "context", "beam", "temperature", "lm", "output", "handle"], flags: ["json", "installed", "srt", "vtt", "live", "mic", "translate", "ignore-cache"],
                                          short: ["o": "output"])
let arguments = invocation.arguments
let command = invocation.command
/// The options each command takes besides `--socket` and `--json`: any other is an error, never ignored.
let commandOptions: [String: Set<String>] = [
    "status": [], "reservations": [], "reserve": [], "release": [],
    "locales": ["module", "installed"], "install": ["locale", "module", "preset"],
    "transcribe": ["locale", "module", "translate", "keep-alive", "srt", "vtt", "live", "rate", "channels", "mic", "device", "prompt", "context", "beam", "temperature", "lm"],
    "lm": ["output", "handle", "ignore-cache"],
]
if let allowed = commandOptions[command] {
    invocation.require(only: allowed, common: ["socket", "json"], program: "earshot", usage: usage)
}
let json = arguments.has("json")

/// The app id `earshot` introduces itself as.
let appID = LanguageModelCommand.appIdentity

/// Connects to a daemon, starting a user daemon when none answers.
func connect() async throws -> DaemonConnection {
    do {
        return try await DaemonConnection.connect(socket: arguments.value("socket"), appID: appID)
    } catch EarshotError.noDaemon {
        Output.note("earshot: no daemon answers; starting earshotd --user (log: \(UserDaemon.logPath(environment: ProcessInfo.processInfo.environment)))")
        let path = try await UserDaemon.start(socket: arguments.value("socket"))
        return try await DaemonConnection.connect(socket: path, appID: appID)
    }
}

/// The locale argument of `reserve`/`release`.
func localeArgument() -> String {
    guard arguments.positional.count == 2 else {
        Output.error("earshot", "\(command) needs one locale, e.g. earshot \(command) en-US")
        exit(ExitCode.failure.rawValue)
    }
    return arguments.positional[1]
}

if command == "devices" {
    do {
        try await DevicesCommand.run(json: json)
        exit(ExitCode.success.rawValue)
    } catch {
        Output.error("earshot", "\(error)")
        exit(ExitCode.failure.rawValue)
    }
}

do {
    let connection = try await connect()
    var code = ExitCode.success
    switch command {
    case "status":
        let status = try await connection.status()
        if json { Output.json(status) } else { StatusPrinter.print(status) }
    case "locales":
        let kind = try AssetKind(rawValue: arguments.value("module") ?? "transcriber").orThrow(ModuleArguments.Problem.unknownModule(arguments.value("module") ?? ""))
        let reply = try await connection.request(LocalesRequest(kind: kind, installed: arguments.has("installed")), expecting: LocalesReply.self)
        if json { Output.json(reply) } else { reply.locales.forEach { print($0) } }
    case "install":
        code = try await InstallCommand.run(connection, candidates: ModuleArguments.candidates(arguments), json: json)
    case "transcribe":
        // The analyzer uses this connection: one hello for the whole command.
        await EarshotService.shared.adopt(connection, appID: appID)
        code = try await TranscribeCommand.run(arguments, connection: connection)
    case "lm":
        code = try await LanguageModelCommand.run(arguments, connection: { connection }, json: json)
    case "reservations":
        ReservationPrinter.print(try await connection.request(ReservationsRequest(), expecting: ReservationsReply.self), json: json, showOwner: false)
    case "reserve":
        let reply = try await connection.request(ReserveRequest(locale: localeArgument()), expecting: ReserveReply.self)
        if json { Output.json(reply) } else { print(reply.created ? "reserved" : "already reserved") }
        code = reply.created ? .success : .nothingToDo
    case "release":
        let reply = try await connection.request(ReleaseRequest(locale: localeArgument()), expecting: ReleaseReply.self)
        if json { Output.json(reply) } else { print(reply.released ? "released" : "not reserved") }
        code = reply.released ? .success : .nothingToDo
    default:
        invocation.unknownCommand(program: "earshot", usage: usage)
    }
    await connection.close()
    exit(code.rawValue)
} catch {
    Output.error("earshot", "\(error)")
    exit(ExitCode.failure.rawValue)
}
