/// What the asset inventory reports as it works, for whoever counts it (the daemon's metrics).
/// Called on the inventory's actor or a transfer thread: implementations must not block.
public protocol AssetObserver: Sendable {
    /// An install (or, `isUpdate`, update) job began (once per job, shared by every waiter).
    func installJobStarted(isUpdate: Bool)
    /// A job ended with `result`.
    func installJobEnded(isUpdate: Bool, result: InstallJobResult)
    /// Bytes received over the network for asset downloads (not bytes a resume kept).
    func downloaded(bytes: Int64)
    /// A download, an archive or a catalog failed verification.
    func verificationFailed(_ check: VerificationCheck)
    /// A garbage collection ran (not a dry run) and freed `freedBytes`.
    func garbageCollected(freedBytes: Int64)
}

/// How an install job ended.
public enum InstallJobResult: String, Sendable, CaseIterable {
    case succeeded, failed, cancelled
    /// Stopped by the daemon's shutdown; the job resumes at the next start.
    case interrupted
}

/// Which verification failed.
public enum VerificationCheck: String, Sendable, CaseIterable {
    /// A download's size or SHA-256 differs from the catalog's.
    case hash
    /// An archive was rejected at extraction (hostile members, missing files, too large).
    case archive
    /// A catalog's minisign signature did not verify.
    case signature
}
