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
