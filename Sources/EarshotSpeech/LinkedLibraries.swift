import CEspeakNG
import CPocketSphinx
import CSherpaOnnx
import EarshotSystem

/// The C libraries this module owns, with the versions loaded at run time.
public enum SpeechLibraries {
    public static var linked: [LinkedLibrary] {
        // PocketSphinx has no version API; reference a symbol so the library is loaded, then name it.
        _ = ps_args()
        return [
            LinkedLibrary.identify(sharedObject: "libpocketsphinx.so", name: "pocketsphinx"),
            LinkedLibrary(name: "sherpa-onnx", version: String(cString: SherpaOnnxGetVersionStr())),
            LinkedLibrary(name: "onnxruntime", version: OrtGetApiBase().pointee.GetVersionString().map { String(cString: $0) } ?? "unknown"),
            // espeak_Info reads nothing but a static string (no initialization needed).
            LinkedLibrary(name: "espeak-ng", version: espeak_Info(nil).map { String(cString: $0) } ?? "unknown"),
        ]
    }
}
