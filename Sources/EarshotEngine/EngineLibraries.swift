import EarshotSherpaOnnx
import EarshotSystem
import EarshotWhisper

/// The C libraries the engine process links, with the versions loaded at run time.
public enum EngineLibraries {
    public static var linked: [LinkedLibrary] {
        [
            LinkedLibrary(name: "sherpa-onnx", version: SherpaOnnxLibrary.version),
            LinkedLibrary(name: "onnxruntime", version: WhisperDecoder.runtimeVersion),
        ]
    }
}
