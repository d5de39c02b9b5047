import CPocketSphinx
import Foundation

enum PocketSphinxLogging {
    /// Turns sphinxbase logging off for the whole process, once. Done instead of `-logfn`, whose
    /// `err_set_logfile` replaces (and closes) one process-wide `FILE *` on every `ps_init`.
    static let silenced: Void = { err_set_logfp(nil) }()
}
