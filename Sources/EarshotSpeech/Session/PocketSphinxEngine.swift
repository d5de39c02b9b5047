import EarshotWire
import Foundation

/// Builds a session's PocketSphinx decoder from an installed dictation asset.
enum PocketSphinxEngine {
    /// `files`: role → path, with roles `acoustic_model` (a file inside the acoustic model
    /// directory), `language_model` and `dictionary`.
    static func decoder(files: [String: String], contextualStrings: [String]) throws -> any StreamingDecoding {
        guard let acousticFile = files["acoustic_model"], let lm = files["language_model"], let dictionary = files["dictionary"] else {
            throw SpeechError.incompleteAsset("the dictation asset lacks acoustic_model, language_model or dictionary")
        }
        let model = try PocketSphinxModel(acousticModel: (acousticFile as NSString).deletingLastPathComponent, languageModel: lm, dictionary: dictionary)
        return PocketSphinxStream(try PocketSphinxDecoder(model: model))
    }
}

extension PocketSphinxEngine {
    /// Approximate memory one decoder holds: the files it reads whole (the acoustic model's
    /// directory, the language model and the dictionary). Blocking (it stats files).
    static func memoryBytes(files: [String: String]) -> Int {
        let manager = FileManager.default
        func size(_ path: String) -> Int { (try? manager.attributesOfItem(atPath: path)[.size] as? Int) ?? 0 }
        var total = 0
        if let acousticFile = files["acoustic_model"] {
            let directory = (acousticFile as NSString).deletingLastPathComponent
            total += ((try? manager.contentsOfDirectory(atPath: directory)) ?? []).reduce(0) { $0 + size(directory + "/" + $1) }
        }
        for role in ["language_model", "dictionary"] { total += files[role].map(size) ?? 0 }
        return total
    }
}

/// ``PocketSphinxDecoder`` as a session's streaming decoder.
/// (Unchecked Sendable: owned by one session and used only on its queue.)
final class PocketSphinxStream: StreamingDecoding, @unchecked Sendable {
    let decoder: PocketSphinxDecoder
    init(_ decoder: PocketSphinxDecoder) { self.decoder = decoder }
    func startUtterance() throws { try decoder.startUtterance() }
    func process(_ samples: [Float]) throws { try decoder.process(samples) }
    func partial() -> Transcription? { decoder.partial() }
    func endUtterance(alternatives: Int) throws -> Transcription { try decoder.endUtterance(alternatives: alternatives) }
    func decodeWhole(_ samples: [Float], alternatives: Int) throws -> Transcription { try decoder.decodeUtterance(samples, alternatives: alternatives) }
}
