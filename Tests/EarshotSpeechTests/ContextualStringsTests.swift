@testable import EarshotSpeech
import Foundation
import Testing
import TestSupport

/// Contextual strings bias PocketSphinx on real speech: LibriVox 0870 ("and mister john dashwood
/// had then leisure to consider how much there might be prudently in his power …").
@Suite(.serialized, .enabled(if: EmbeddedModels.runs(PocketSphinxFixtures.available), "needs Debian pocketsphinx-en-us and pocketsphinx-testdata"))
struct ContextualStringsTests {
    static let utterance = "sense_and_sensibility_01_austen_64kb-0870"

    @Test func measure() async throws {
        let samples = try PocketSphinxFixtures.librivox(Self.utterance)
        let texts = try await onPocketSphinxThread {
            let stream = PocketSphinxStream(try PocketSphinxDecoder(model: PocketSphinxFixtures.model()))
            var texts: [String] = []
            texts.append(try stream.decodeWhole(samples, alternatives: 0).text)
            try stream.setContext(["Dashwood", "prudently"])
            texts.append(try stream.decodeWhole(samples, alternatives: 0).text)
            try stream.setContext(["John Dashwood"])
            texts.append(try stream.decodeWhole(samples, alternatives: 0).text)
            try stream.setContext([])
            texts.append(try stream.decodeWhole(samples, alternatives: 0).text)
            return texts
        }
        for text in texts { print("CTX: \(text)") }
    }
}
