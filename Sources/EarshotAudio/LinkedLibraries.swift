import CSndfile
import CSoxr
import EarshotSystem

/// The C libraries this module owns, with the versions loaded at run time.
public enum AudioLibraries {
    public static var linked: [LinkedLibrary] {
        [
            LinkedLibrary(name: "sndfile", version: String(cString: sf_version_string())),
            LinkedLibrary(name: "soxr", version: String(cString: soxr_version())),
        ]
    }
}
