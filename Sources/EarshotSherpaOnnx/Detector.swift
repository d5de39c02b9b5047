import CSherpaOnnx
import EarshotSystem
import EarshotEngineLink
import EarshotWire
import Foundation

/// A silero voice activity detector created through sherpa-onnx's C API, in the engine process.
/// Steps on one detector are serialized by the server.
public final class Detector: @unchecked Sendable {
    // @unchecked: `vad` is used by one request at a time (the server's per-object queue).
    private let vad: OpaquePointer

    /// Blocking (a few milliseconds); nil when sherpa-onnx refuses the configuration or its buffer
    /// is longer than ``EngineVADLoad/maxBufferSeconds``.
    public init?(_ request: EngineVADLoad, mmapThreshold: Int) {
        // Its per-step segment copies must stay under the engine's mmap threshold.
        guard request.bufferSeconds > 0, request.bufferSeconds <= EngineVADLoad.maxBufferSeconds,
              Double(request.sampleRate) * request.bufferSeconds * 4 < Double(mmapThreshold) else { return nil }
        let made: OpaquePointer? = withCStrings([request.model, "cpu"]) { strings in
            var config = SherpaOnnxVadModelConfig()
            config.silero_vad.model = strings[0]
            config.silero_vad.threshold = Float(request.threshold)
            config.silero_vad.min_silence_duration = Float(request.minSilenceDuration)
            config.silero_vad.min_speech_duration = Float(request.minSpeechDuration)
            config.silero_vad.max_speech_duration = Float(request.maxSpeechDuration)
            config.silero_vad.window_size = Int32(request.windowSize)
            config.sample_rate = Int32(request.sampleRate)
            config.num_threads = 1
            config.provider = strings[1]
            return SherpaOnnxCreateVoiceActivityDetector(&config, Float(request.bufferSeconds))
        }
        guard let made else { return nil }
        vad = made
    }

    deinit {
        SherpaOnnxDestroyVoiceActivityDetector(vad)
        MemoryReclaim.afterRelease()
    }

    /// Runs `request`'s steps and reports what each did.
    public func run(_ request: EngineVADStep, samples: [Float], id: String) -> EngineVADState {
        switch request.action {
        case .accept:
            let size = request.stepSamples > 0 ? request.stepSamples : max(1, samples.count)
            var steps: [EngineVADState.Step] = []
            var offset = 0
            repeat {
                let end = min(offset + size, samples.count)
                samples[offset..<end].withUnsafeBufferPointer {
                    SherpaOnnxVoiceActivityDetectorAcceptWaveform(vad, $0.baseAddress, Int32($0.count))
                }
                steps.append(finished())
                offset = end
            } while offset < samples.count
            return EngineVADState(id: id, steps: steps)
        case .flush:
            SherpaOnnxVoiceActivityDetectorFlush(vad)
        case .reset:
            SherpaOnnxVoiceActivityDetectorReset(vad)
        }
        return EngineVADState(id: id, steps: [finished()])
    }

    /// The segments finished since the last call, taken out of the detector.
    private func finished() -> EngineVADState.Step {
        var segments: [[Int64]] = []
        while SherpaOnnxVoiceActivityDetectorEmpty(vad) == 0 {
            guard let segment = SherpaOnnxVoiceActivityDetectorFront(vad) else { break }
            segments.append([Int64(segment.pointee.start), Int64(segment.pointee.n)])
            SherpaOnnxDestroySpeechSegment(segment)
            SherpaOnnxVoiceActivityDetectorPop(vad)
        }
        return EngineVADState.Step(segments: segments, detected: SherpaOnnxVoiceActivityDetectorDetected(vad) != 0)
    }
}

/// Copies `strings` to C strings that stay valid for the whole of `body` (sherpa-onnx reads a
/// config's strings during the create call), then frees them.
func withCStrings<R>(_ strings: [String], _ body: ([UnsafePointer<CChar>]) -> R) -> R {
    let owned = strings.map { strdup($0)! }
    defer { owned.forEach { free($0) } }
    return body(owned.map { UnsafePointer($0) })
}
