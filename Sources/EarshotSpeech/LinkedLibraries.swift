import CEspeakNG
import CPocketSphinx
import EarshotSystem

/// The C libraries this module owns, with the versions loaded at run time.
public enum SpeechLibraries {
    /// PocketSphinx and espeak-ng (linked here), and the engine process's sherpa-onnx and ONNX
    /// Runtime (asked of `earshot-engine`; blocking).
    public static var linked: [LinkedLibrary] {
        // PocketSphinx has no version API; reference a symbol so the library is loaded, then name it.
        _ = ps_args()
        return [
            LinkedLibrary.identify(sharedObject: "libpocketsphinx.so", name: "pocketsphinx"),
            // espeak_Info reads nothing but a static string (no initialization needed).
            LinkedLibrary(name: "espeak-ng", version: espeak_Info(nil).map { String(cString: $0) } ?? "unknown"),
        ] + EngineProcess.shared.libraryVersions()
    }
}
