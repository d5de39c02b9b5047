import Earshot
import EarshotCommandLine
import EarshotLanguageModel
import EarshotWire
import Foundation

/// `earshot lm build|prepare|list`: custom language models without a Swift toolchain at hand.
public enum LanguageModelCommand {
    /// What `lm` was asked for: the subcommand and its file arguments.
    public static func run(_ arguments: Arguments, connection: @Sendable () async throws -> DaemonConnection, json: Bool) async throws -> ExitCode {
        let positional = Array(arguments.positional.dropFirst())
        switch positional.first {
        case "build":
            guard positional.count == 2, let output = arguments.value("output") else {
                throw WireError(.badRequest, "usage: earshot lm build DATA.json -o FILE.bin")
            }
            let document = try build(URL(fileURLWithPath: positional[1]))
            let data = try document.encoded()
            try data.write(to: URL(fileURLWithPath: output), options: .atomic)
            if json { Output.json(["output": output]) } else { print("wrote \(output) (\(document.identifier) \(document.version), \(document.locale))") }
            return .success
        case "prepare":
            guard positional.count == 2 else { throw WireError(.badRequest, "usage: earshot lm prepare FILE.bin [--handle PATH] [--ignore-cache]") }
            let file = URL(fileURLWithPath: positional[1])
            let handle = URL(fileURLWithPath: arguments.value("handle") ?? file.deletingPathExtension().appendingPathExtension("handle").path)
            await EarshotService.shared.adopt(try await connection(), appID: appIdentity)
            try await SFSpeechLanguageModel.prepareCustomLanguageModel(for: file, configuration: .init(languageModel: handle), ignoresCache: arguments.has("ignore-cache"))
            if json { Output.json(["handle": handle.path]) } else { print("prepared \(file.path); handle: \(handle.path) (earshot transcribe --lm \(handle.path) FILE…)") }
            return .success
        case "list":
            LanguageModelPrinter.print(try await connection().request(LanguageModelsRequest(), expecting: LanguageModelsReply.self), json: json, showOwner: false)
            return .success
        default:
            throw WireError(.badRequest, "earshot lm takes build, prepare or list")
        }
    }

    /// The app id `earshot` introduces itself as (prepared models belong to it).
    public static let appIdentity = "org.earshot.earshot"

    /// The document of `url`: the file format itself, or the same JSON without `format` and
    /// `formatVersion` (the DSL's JSON form); checked strictly either way.
    static func build(_ url: URL) throws -> CustomLanguageModelDocument {
        let data = try Data(contentsOf: url)
        guard var object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw EarshotError.invalidLanguageModelData("\(url.path) is not a JSON object")
        }
        object["format"] = object["format"] ?? CustomLanguageModelDocument.formatName
        object["formatVersion"] = object["formatVersion"] ?? CustomLanguageModelDocument.currentVersion
        do {
            return try CustomLanguageModelDocument.read(try JSONSerialization.data(withJSONObject: object))
        } catch {
            throw EarshotError.invalidLanguageModelData("\(url.path): \(error)")
        }
    }
}
