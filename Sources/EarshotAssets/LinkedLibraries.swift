import CArchive
import CCrypto
import CCurl
import CSQLite
import EarshotSystem

/// The C libraries this module owns, with the versions loaded at run time.
public enum AssetsLibraries {
    public static var linked: [LinkedLibrary] {
        let curl = CCurl_version_info().pointee
        return [
            LinkedLibrary(name: "curl", version: String(cString: curl.version)),
            LinkedLibrary(name: "sqlite", version: String(cString: sqlite3_libversion())),
            LinkedLibrary(name: "archive", version: String(cString: archive_version_string())),
            LinkedLibrary(name: "openssl", version: String(cString: OpenSSL_version(OPENSSL_VERSION))),
        ]
    }
}
