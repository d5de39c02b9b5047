import Foundation
import Testing
import TestSupport

/// The project's own model pipeline (`Scripts/models/`): the converter's Python tests (a tiny random
/// Whisper in CTranslate2 format converted, checked against a numpy reference, metadata, the
/// cross-attention output, determinism), and the converted models setup installed.
@Suite struct ModelPipelineTests {
    @Test func converterTestsPass() async throws {
        let directory = try TempDirectory("espy")
        defer { directory.remove() }
        let run = try await ChildProcess.run("/usr/bin/env", ["python3", "-m", "unittest", "discover", "-s", SpeechFixtures.projectRoot + "/Tests/python", "-v"],
                                             in: directory, timeout: .seconds(300))
        print(run.stderr.split(separator: "\n").suffix(14).joined(separator: "\n"))
        #expect(run.status == 0, "python converter tests failed:\n\(run.stderr)")
        #expect(run.stderr.contains("\nOK"))
        #expect(!run.stderr.contains("skipped"), "no converter test may be skipped")
    }

    @Test(.enabled(if: EmbeddedModels.runs(EmbeddedModels.whisperPresent(EmbeddedModels.whisperBase, prefix: "base")), "needs Scripts/setup.sh"))
    func installedModelsCarryTheTimestampOutputAndLanguageMetadata() async throws {
        let directory = try TempDirectory("espy")
        defer { directory.remove() }
        let script = try directory.write("model-info.py", """
        import json, sys, onnx
        out = {}
        for name, path in (("encoder", sys.argv[1]), ("decoder", sys.argv[2])):
            m = onnx.load(path, load_external_data=False)
            out[name] = {"outputs": [o.name for o in m.graph.output], "meta": {p.key: p.value for p in m.metadata_props}}
        print(json.dumps(out))
        """)
        let base = EmbeddedModels.whisperBase
        let run = try await ChildProcess.run("/usr/bin/env", ["python3", script, base + "/base-encoder.int8.onnx", base + "/base-decoder.int8.onnx"], in: directory)
        try #require(run.status == 0, "\(run.stderr)")
        let info = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: [String: Any]])
        let meta = try #require(info["encoder"]?["meta"] as? [String: String])
        #expect(meta["n_alignment_heads"] == "8", "Whisper base has 8 alignment heads")
        #expect(meta["is_multilingual"] == "1")
        let codes = (meta["all_language_codes"] ?? "").split(separator: ",").map(String.init)
        #expect(codes.count == 99 && codes.contains("he") && codes.contains("jw"))
        let outputs = try #require(info["decoder"]?["outputs"] as? [String])
        #expect(outputs.count == 4, "the fourth decoder output carries the alignment heads' cross-attention: \(outputs)")
    }
}
