import CSherpaOnnx
import EarshotSystem

/// The C libraries the engine process links, with the versions loaded at run time.
public enum EngineLibraries {
    public static var linked: [LinkedLibrary] {
        [
            LinkedLibrary(name: "sherpa-onnx", version: String(cString: SherpaOnnxGetVersionStr())),
            LinkedLibrary(name: "onnxruntime", version: OrtGetApiBase().pointee.GetVersionString().map { String(cString: $0) } ?? "unknown"),
        ]
    }
}
