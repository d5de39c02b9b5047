import EarshotWire
import Foundation
import Testing

/// A session's Whisper decoding options are checked where they arrive: a value out of range fails
/// the open's decoding (the daemon answers `bad_request`), never reaching the engine.
@Suite struct DecodingOptionsTests {
    private func decode(_ json: String) throws -> AnalysisOptions {
        try JSONDecoder().decode(AnalysisOptions.self, from: Data(json.utf8))
    }

    @Test func goodOptionsRoundTrip() throws {
        let options = try decode(#"{"decoding": {"prompt": "Dashwood, Norland.", "beam_size": 3, "temperature": 0.2}}"#)
        #expect(options.decoding == DecodingOptions(prompt: "Dashwood, Norland.", beamSize: 3, temperature: 0.2))
        let again = try JSONDecoder().decode(AnalysisOptions.self, from: JSONEncoder().encode(options))
        #expect(again == options)
        #expect(try decode("{}").decoding == nil)
    }

    @Test func outOfRangeValuesAreRefused() {
        for json in [
            #"{"decoding": {"beam_size": 0}}"#, #"{"decoding": {"beam_size": 17}}"#,
            #"{"decoding": {"temperature": -0.1}}"#, #"{"decoding": {"temperature": 1.5}}"#,
            #"{"decoding": {"prompt": "a\u0000b"}}"#, #"{"decoding": {"prompt": 42}}"#,
        ] {
            #expect(throws: DecodingError.self, "\(json)") { try decode(json) }
        }
        let long = String(repeating: "x", count: DecodingOptions.maxPromptCharacters + 1)
        #expect(DecodingOptions(prompt: long).problem != nil)
        #expect(DecodingOptions(prompt: "line one\nline two\ttabbed").problem == nil)
    }

    /// Wyoming's biasing lists become the session's contextual strings, names first.
    @Test func wyomingTranscribeCarriesItsBiasLists() throws {
        let request = try JSONDecoder().decode(Transcribe.self, from: Data(#"{"language": "en", "transcript_names": ["Siobhan"], "transcript_terms": ["Xarelto"]}"#.utf8))
        #expect(request.biasPhrases == ["Siobhan", "Xarelto"])
        #expect(try JSONDecoder().decode(Transcribe.self, from: Data(#"{"name": "whisper-base"}"#.utf8)).biasPhrases.isEmpty)
    }
}
