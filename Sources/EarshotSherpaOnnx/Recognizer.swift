import CSherpaOnnx
import EarshotSystem
import EarshotWire
import Foundation

/// A Whisper recognizer created through sherpa-onnx's C API, in the engine process. Decodes may
/// run concurrently, each on a stream of its own (recognizers are thread-safe, streams are not:
/// k2-fsa/sherpa-onnx#1450).
final class Recognizer: @unchecked Sendable {
    // @unchecked: `recognizer` is created in init and destroyed in deinit only.
    private let recognizer: OpaquePointer

    /// Loads the model and runs a 1 s warm-up decode (ONNX Runtime allocates its working memory on
    /// the first run). Blocking; nil when sherpa-onnx refuses the configuration.
    init?(_ request: EngineWhisperLoad) {
        let made: OpaquePointer? = withCStrings([
            request.encoder, request.decoder, request.tokens, request.language, request.task, "cpu", "greedy_search",
        ]) { strings in
            var config = SherpaOnnxOfflineRecognizerConfig()
            config.feat_config.sample_rate = 16000
            config.feat_config.feature_dim = 80
            config.model_config.whisper.encoder = strings[0]
            config.model_config.whisper.decoder = strings[1]
            config.model_config.tokens = strings[2]
            // Empty: multilingual models identify the language of each decode.
            config.model_config.whisper.language = strings[3]
            config.model_config.whisper.task = strings[4]
            // Token times come from cross-attention where the export provides it; ignored otherwise.
            config.model_config.whisper.enable_token_timestamps = 1
            config.model_config.provider = strings[5]
            config.model_config.num_threads = Int32(request.threads)
            config.decoding_method = strings[6]
            return SherpaOnnxCreateOfflineRecognizer(&config)
        }
        guard let made else { return nil }
        recognizer = made
        _ = decode([Float](repeating: 0, count: 16000), sampleRate: 16000, id: "")
    }

    deinit {
        SherpaOnnxDestroyOfflineRecognizer(recognizer)
        // ONNX Runtime's ~100 MiB of working memory goes back with the model.
        MemoryReclaim.afterRelease()
    }

    /// One decode on a stream of its own. Blocking.
    func decode(_ samples: [Float], sampleRate: Int, id: String) -> EngineWhisperResult {
        let stream = SherpaOnnxCreateOfflineStream(recognizer)
        defer { SherpaOnnxDestroyOfflineStream(stream) }
        samples.withUnsafeBufferPointer {
            SherpaOnnxAcceptWaveformOffline(stream, Int32(sampleRate), $0.baseAddress, Int32($0.count))
        }
        SherpaOnnxDecodeOfflineStream(recognizer, stream)
        guard let result = SherpaOnnxGetOfflineStreamResult(stream) else {
            return EngineWhisperResult(id: id, text: "", language: nil, tokens: [], starts: [], durations: nil, logProbabilities: nil)
        }
        defer { SherpaOnnxDestroyOfflineRecognizerResult(result) }
        let raw = result.pointee
        let count = Int(raw.count)
        var tokens: [String] = []
        var starts: [Double] = []
        if let times = raw.timestamps, let pieces = raw.tokens_arr {
            for index in 0..<count {
                tokens.append(pieces[index].map { String(cString: $0) } ?? "")
                starts.append(Double(times[index]))
            }
        }
        return EngineWhisperResult(
            id: id, text: raw.text.map { String(cString: $0) } ?? "", language: raw.lang.map { String(cString: $0) },
            tokens: tokens, starts: starts,
            durations: tokens.isEmpty ? nil : raw.durations.map { values in (0..<count).map { Double(values[$0]) } },
            logProbabilities: raw.ys_log_probs.map { values in (0..<count).map { Double(values[$0]) } })
    }
}

/// Copies `strings` to C strings that stay valid for the whole of `body` (sherpa-onnx reads a
/// config's strings during the create call), then frees them.
func withCStrings<R>(_ strings: [String], _ body: ([UnsafePointer<CChar>]) -> R) -> R {
    let owned = strings.map { strdup($0)! }
    defer { owned.forEach { free($0) } }
    return body(owned.map { UnsafePointer($0) })
}
