import EarshotSystem
import EarshotWire
import Foundation

/// What an install request did.
public struct InstallOutcome: Sendable, Hashable {
    /// True when everything was already installed (Apple returns no installation request then).
    public var nothingToDo: Bool
    /// `id@version` of every asset this request waited for.
    public var installed: [String]
    /// Locales reserved automatically for the caller.
    public var reserved: [String]
}

extension AssetService {
    /// Makes sure `modules` can run for `client`: reserves their locales (all or none, within the
    /// quota; also when the assets are installed already, e.g. by another app, so that GC keeps
    /// them for this client too) and joins the one job per missing asset, reporting progress to
    /// `progress` until every job ends. Nothing to do when everything is installed.
    ///
    /// When a job fails (a bad download, a rejected archive, a full disk, a cancellation), the
    /// reservations this call created are rolled back, so failed installs never use up the quota;
    /// reservations that existed before stay. A caller that stops waiting (task cancellation) keeps
    /// its reservations and the job goes on, as does a job interrupted by shutdown (it resumes at
    /// the next start).
    public func install(_ modules: [ModuleConfiguration], for client: ClientIdentity, progress: @escaping @Sendable (InstallProgress) -> Void) async throws -> InstallOutcome {
        let assets = try requiredAssets(modules)
        // Under the gate: a GC between the look at what is installed and the reservation would
        // otherwise remove an installed asset this request then counts on.
        let (reserved, started) = try await exclusively { () async throws -> ([String], [InstallJob]) in
            let installed = try await installedAssets()
            let missing = assets.filter { asset in !installed.contains { $0.entry.id == asset.id } }
            let reserved = try await reserve(modules.compactMap(\.locale), for: client)
            return (reserved, missing.map { job(for: $0, bandwidthLimit: nil, isUpdate: false, requestedBy: "uid \(client.uid) app \(client.appID)") })
        }
        guard !started.isEmpty else { return InstallOutcome(nothingToDo: true, installed: [], reserved: reserved) }
        let sinks = started.map { ($0, $0.addSink(progress)) }
        defer { sinks.forEach { $0.0.removeSink($0.1) } }
        do {
            for job in started { try await job.wait() }
        } catch let failure as AssetError where !shuttingDown {
            await rollBack(reserved, for: client, after: failure)
            throw failure
        }
        return InstallOutcome(nothingToDo: false, installed: started.map(\.key), reserved: reserved)
    }

    /// What ``install(_:for:progress:)`` would fetch for `modules`: every needed asset not
    /// installed yet, with its bytes to download and the space it needs. Changes nothing (no job,
    /// no reservation, so neither the quota nor the space check is applied).
    public func installPlan(_ modules: [ModuleConfiguration]) async throws -> (planned: [InstallPlanInfo], availableBytes: Int64) {
        let installed = try await installedAssets()
        let planned = try requiredAssets(modules).filter { asset in !installed.contains { $0.entry.id == asset.id } }.map { asset in
            let needs = fetchNeeds(asset)
            return InstallPlanInfo(asset: asset.id, version: asset.version, downloadBytes: needs.download, spaceNeeded: needs.space)
        }
        return (planned, Self.availableBytes(settings.stateDirectory))
    }

    /// What installing `entry` takes: the bytes still to download (a partial counts as fetched)
    /// and those plus its installed size.
    func fetchNeeds(_ entry: CatalogAsset) -> (download: Int64, space: Int64) {
        let download = max(0, entry.size - (Self.fileSize(downloadPath(entry)) ?? 0))
        return (download, download + entry.installedSize)
    }

    /// Removes the reservations a failed install created for `client`, then cancels the jobs no
    /// reservation needs any more (the request's other assets). A failure to do so is logged: the
    /// install's own error is what the caller needs to see.
    func rollBack(_ created: [String], for client: ClientIdentity, after failure: AssetError) async {
        guard !created.isEmpty else { return }
        do {
            try await database.write { db in
                for locale in created {
                    try db.execute("DELETE FROM reservations WHERE uid = ? AND app_id = ? AND locale = ?", [.int(Int64(client.uid)), .text(client.appID), .text(locale)])
                }
            }
            log("install for \(client) failed (\(failure)): released its new reservations of \(created.joined(separator: ", "))")
            try await cancelUnneededJobs()
        } catch {
            log("install for \(client) failed; rolling back its reservations of \(created.joined(separator: ", ")) failed too: \(error)")
        }
    }

    /// The running job for `entry`, or a new one handed to ``run()``.
    func job(for entry: CatalogAsset, bandwidthLimit: Int64?, isUpdate: Bool, requestedBy: String) -> InstallJob {
        let key = "\(entry.id)@\(entry.version)"
        if let existing = jobs[key] { return existing }
        let job = InstallJob(entry: entry, bandwidthLimit: bandwidthLimit, isUpdate: isUpdate, requestedBy: requestedBy, clock: clock)
        jobs[key] = job
        jobSubmitter.yield(job)
        return job
    }

    /// Cancels the install of `assetID` (admin); returns whether a job was running.
    public func cancelInstall(_ assetID: String) -> Bool {
        let matching = jobs.values.filter { $0.entry.id == assetID }
        matching.forEach { $0.cancel() }
        return !matching.isEmpty
    }

    /// Cancels jobs that no reservation needs any more (not updates of installed assets).
    func cancelUnneededJobs() async throws {
        let reservations = try await reservations(of: nil)
        for job in jobs.values where !job.isUpdate && !Self.isNeeded(job.entry, by: reservations) {
            log("cancelling install of \(job.key): no reservation needs it")
            job.cancel()
        }
    }

    /// Jobs a previous run started and did not finish.
    func pendingJobs() async throws -> [(entry: CatalogAsset, bandwidthLimit: Int64?, isUpdate: Bool, requestedBy: String)] {
        try await database.read { db in
            try db.execute("SELECT entry, bandwidth_limit, is_update, requested_by FROM install_jobs ORDER BY created").compactMap { row in
                guard let json = row[0].blob, let entry = try? JSONDecoder().decode(CatalogAsset.self, from: Data(json)) else { return nil }
                return (entry, row[1].int, row[2].int == 1, row[3].text ?? "an earlier run")
            }
        }
    }

    /// Runs one job to its end and tells every waiter. A cancelled job's partial download is
    /// recorded in `resumable_downloads` (kept for a later resume); any other failure removes it,
    /// unless another running job shares the file.
    func execute(_ job: InstallJob) async {
        observer?.installJobStarted(isUpdate: job.isUpdate)
        let result: Result<Void, AssetError>
        var replaced: Int?
        do {
            replaced = try await perform(job)
            result = .success(())
        } catch {
            result = .failure(Self.map(error, asset: job.entry))
        }
        if case .failure = result, shuttingDown {
            log("install of \(job.key) interrupted by shutdown; it resumes at the next start")
        } else if case .failure(let error) = result {
            log("install failed: \(AssetError.describe(error, naming: job.key))", .warning,
                ["asset": job.entry.id, "to_version": "\(job.entry.version)", "source": job.entry.urls.first ?? "", "reason": "\(error)",
                 "kind": job.isUpdate ? "update" : "install"])
            let entry = job.entry
            let download = downloadPath(entry)
            // Cancelled mid-way: the partial stays for a later resume. Failed: it goes.
            let keep = if case .cancelled = error { Self.fileSize(download) != nil } else { false }
            let now = clock.wallTime()
            do {
                try await database.write { db in
                    try db.execute("DELETE FROM install_jobs WHERE id = ? AND version = ?", [.text(entry.id), .int(Int64(entry.version))])
                    if keep {
                        try db.execute("INSERT OR REPLACE INTO resumable_downloads (sha256, id, version, since) VALUES (?, ?, ?, ?)",
                                       [.text(entry.sha256), .text(entry.id), .int(Int64(entry.version)), .double(now)])
                    } else {
                        try db.execute("DELETE FROM resumable_downloads WHERE sha256 = ?", [.text(entry.sha256)])
                    }
                }
            } catch {
                log("install of \(job.key): recording the failure failed: \(error)")
            }
            if !keep, !jobs.values.contains(where: { $0 !== job && $0.entry.sha256 == entry.sha256 }) {
                do {
                    try await downloader.removePartial(download)
                } catch {
                    log("install of \(job.key): removing its partial download failed: \(error)")
                }
            }
        } else if let replaced, job.isUpdate {
            log("updated \(job.entry.id) \(replaced) → \(job.entry.version) (by \(job.requestedBy))", .notice,
                ["asset": job.entry.id, "from_version": "\(replaced)", "to_version": "\(job.entry.version)", "requested_by": job.requestedBy,
                 "source": job.entry.urls.first ?? ""])
        } else {
            log("installed \(job.key) (by \(job.requestedBy))", .info, ["asset": job.entry.id, "to_version": "\(job.entry.version)", "requested_by": job.requestedBy])
        }
        jobs[job.key] = nil
        observer?.installJobEnded(isUpdate: job.isUpdate, result: Self.jobResult(result, shuttingDown: shuttingDown))
        job.finish(result)
    }

    /// How a job's `result` counts for the observer.
    static func jobResult(_ result: Result<Void, AssetError>, shuttingDown: Bool) -> InstallJobResult {
        switch result {
        case .success: .succeeded
        case .failure where shuttingDown: .interrupted
        case .failure(.cancelled): .cancelled
        case .failure: .failed
        }
    }

    /// download → verify → extract into staging → fsync + rename → commit. Returns the version
    /// the commit made non-current, if any.
    private func perform(_ job: InstallJob) async throws -> Int? {
        let entry = job.entry
        // An earlier job for the same version may have committed while this one was being set up.
        if try await installedVersions(entry.id).contains(where: { $0.entry.version == entry.version }) { return nil }
        let entryJSON = Array(try JSONEncoder().encode(entry))
        let now = clock.wallTime()
        try await database.write { db in
            try db.execute("INSERT OR IGNORE INTO install_jobs (id, version, entry, bandwidth_limit, is_update, created, requested_by) VALUES (?, ?, ?, ?, ?, ?, ?)",
                           [.text(entry.id), .int(Int64(entry.version)), .blob(entryJSON), job.bandwidthLimit.map { .int($0) } ?? .null, .int(job.isUpdate ? 1 : 0), .double(now),
                            .text(job.requestedBy)])
        }

        // Download (resumes a partial file; a complete one is only re-verified), unless these bytes
        // failed verification under the same catalogs, or they and the tree cannot fit.
        let download = downloadPath(entry)
        try await refuseKnownBadDownload(entry)
        try checkSpace(entry, download: download)
        job.publish(.downloading, bytesDone: Self.fileSize(download) ?? 0)
        try await pause(at: .downloading)
        // A mirror whose bytes fail verification is left out and the next one tried: a corrupt
        // cache or registry must not block what the catalog's other sources serve intact.
        var refused: [String] = []
        var reauthorized = false
        while true {
            var served: String?
            var remaining = 0
            if Self.fileSize(download) != entry.size {
                var options = settings.download
                options.maxBytesPerSecond = job.bandwidthLimit ?? options.maxBytesPerSecond
                var mirrors = await mirrors(for: entry)
                mirrors.urls.removeAll { refused.contains($0) }
                let request = DownloadRequest(urls: mirrors.urls, destination: download, expectedSize: entry.size, options: options, access: mirrors.access)
                do {
                    let fetched = try await downloader.download(request, progress: { job.publish(.downloading, bytesDone: $0.bytesDone) }, cancellation: job.cancellation)
                    observer?.downloaded(bytes: fetched.bytesTransferred)
                    served = fetched.url
                    remaining = mirrors.urls.count - 1 - (mirrors.urls.firstIndex(of: fetched.url) ?? 0)
                } catch {
                    // A registry's token may expire during a long download: a resume it refuses
                    // (401) gets one fresh token, and the download goes on where it stopped.
                    if !reauthorized, case .allMirrorsFailed(let failures) = error,
                       failures.contains(where: { $0.reason == .httpStatus(401) && mirrors.access[$0.url] != nil }) {
                        reauthorized = true
                        continue
                    }
                    throw Self.map(error, asset: entry)
                }
            }
            try checkCancelled(job)

            // Verify size and SHA-256.
            job.publish(.verifying, bytesDone: entry.size)
            try await pause(at: .verifying)
            let digest = try await BlockingWork.run("earshot.verify") { try FileDigest.sha256(path: download) }
            if Self.fileSize(download) == entry.size, digest == entry.sha256 { break }
            Self.removeDownload(download)
            observer?.verificationFailed(.hash)
            let reason = "downloaded file does not match the catalog's size and SHA-256 (got \(digest))"
            if let served, remaining > 0 {
                refused.append(served)
                log("\(entry.id)@\(entry.version) from \(served): \(reason); trying the next mirror", .warning,
                    ["asset": entry.id, "to_version": "\(entry.version)", "source": served, "reason": reason])
                continue
            }
            try await recordBadDownload(entry, reason: reason)
            throw AssetError.verificationFailed("\(entry.id)@\(entry.version): \(reason)")
        }
        try checkCancelled(job)

        // Extract into a staging dir on the state filesystem.
        job.publish(.extracting)
        try await pause(at: .extracting)
        let available = Self.availableBytes(settings.stateDirectory)
        guard available >= entry.installedSize else {
            throw AssetError.insufficientStorage(needed: entry.installedSize, available: available, path: settings.stateDirectory)
        }
        let staging = settings.stagingDirectory + "/\(entry.id)-\(entry.version)-\(UUID().uuidString.prefix(8))"
        var placed: String? // renamed into place but not yet committed
        var replaced: Int?
        do {
            try FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
            let single = entry.format == .file ? entry.files.values.first : nil
            let result = try await BlockingWork.run("earshot.extract") {
                try ArchiveExtractor.extract(archive: download, format: entry.format, into: staging, limits: ExtractionLimits(maxBytes: entry.installedSize), singleFileName: single)
            }
            for (role, path) in entry.files where !FileManager.default.fileExists(atPath: staging + "/" + path) {
                throw AssetError.verificationFailed("\(entry.id)@\(entry.version): the archive has no \(role) file at \(path)")
            }
            try checkCancelled(job)

            // Move into place atomically, then commit.
            job.publish(.committing)
            try await pause(at: .committing)
            let final = try await BlockingWork.run("earshot.commit") { [settings] in
                try Self.moveIntoPlace(staging: staging, assets: settings.assetsDirectory, id: entry.id, version: entry.version)
            }
            placed = final
            let committed = clock.wallTime()
            // Relative to the state directory, so the state directory can move.
            let stored = settings.storedPath(final)
            replaced = try await database.write { db -> Int? in
                let previous = try db.execute("SELECT version FROM installed_assets WHERE id = ? AND current = 1 AND version != ?",
                                              [.text(entry.id), .int(Int64(entry.version))]).first?[0].int.map(Int.init)
                try db.execute("""
                    INSERT OR REPLACE INTO installed_assets (id, version, path, bytes, entry, current, installed_at, last_used, unneeded_since)
                    VALUES (?, ?, ?, ?, ?, 1, ?, ?, NULL)
                    """, [.text(entry.id), .int(Int64(entry.version)), .text(stored), .int(result.bytes), .blob(entryJSON), .double(committed), .double(committed)])
                // Superseded since now: the rollback window counts from here.
                try db.execute("UPDATE installed_assets SET current = 0, unneeded_since = coalesce(unneeded_since, ?) WHERE id = ? AND version != ?",
                               [.double(committed), .text(entry.id), .int(Int64(entry.version))])
                try db.execute("DELETE FROM install_jobs WHERE id = ? AND version = ?", [.text(entry.id), .int(Int64(entry.version))])
                try db.execute("DELETE FROM resumable_downloads WHERE sha256 = ?", [.text(entry.sha256)])
                return previous
            }
        } catch {
            try? FileManager.default.removeItem(atPath: staging)
            // The commit failed (e.g. the disk filled up): nothing refers to the renamed tree.
            if let placed { try? FileManager.default.removeItem(atPath: placed) }
            let failure = Self.map(error, asset: entry)
            // A download whose archive is rejected will never install: do not keep it in the cache.
            if case .verificationFailed = failure {
                observer?.verificationFailed(.archive)
                Self.removeDownload(download)
            }
            throw failure
        }
        Self.removeDownload(download)
        return replaced
    }

    /// Room needed beyond `bytes` of declared sizes (filesystem metadata, the database, logs):
    /// 1/64 of them plus 64 KiB.
    static func spaceMargin(_ bytes: Int64) -> Int64 { bytes / 64 + (64 << 10) }

    /// Refuses before the first byte when what is left to download, the installed tree and a
    /// ``spaceMargin(_:)`` do not fit (both on one filesystem when cache and state share it).
    func checkSpace(_ entry: CatalogAsset, download: String) throws(AssetError) {
        let remaining = max(0, entry.size - (Self.fileSize(download) ?? 0))
        let (cache, state) = (settings.cacheDirectory, settings.stateDirectory)
        let needs: [(path: String, bytes: Int64)] = Self.sameFilesystem(cache, state)
            ? [(state, remaining + entry.installedSize + Self.spaceMargin(remaining + entry.installedSize))]
            : [(cache, remaining + Self.spaceMargin(remaining)), (state, entry.installedSize + Self.spaceMargin(entry.installedSize))]
        for need in needs {
            let available = Self.availableBytes(need.path)
            guard available >= need.bytes else { throw .insufficientStorage(needed: need.bytes, available: available, path: need.path) }
        }
    }

    static func sameFilesystem(_ a: String, _ b: String) -> Bool {
        var (sa, sb) = (stat(), stat())
        return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev
    }

    /// The configured catalogs' versions, as `failed_downloads` records them.
    var catalogFingerprint: String {
        settings.catalogURLs.map { "\($0)=\(catalogs[$0]?.catalog.version ?? 0)" }.joined(separator: " ")
    }

    /// Remembers that `entry`'s download failed verification under the current catalogs.
    func recordBadDownload(_ entry: CatalogAsset, reason: String) async throws {
        let (fingerprint, now) = (catalogFingerprint, clock.wallTime())
        try await database.write { db in
            try db.execute("INSERT OR REPLACE INTO failed_downloads (sha256, id, version, catalogs, reason, since) VALUES (?, ?, ?, ?, ?, ?)",
                           [.text(entry.sha256), .text(entry.id), .int(Int64(entry.version)), .text(fingerprint), .text(reason), .double(now)])
        }
    }

    /// A download that failed verification is not fetched again until the catalogs change
    /// (a new version of any source); then its record goes and it is tried once more.
    func refuseKnownBadDownload(_ entry: CatalogAsset) async throws {
        let fingerprint = catalogFingerprint
        let known = try await database.write { db -> (reason: String, since: Double)? in
            guard let row = try db.execute("SELECT catalogs, reason, since FROM failed_downloads WHERE sha256 = ?", [.text(entry.sha256)]).first else { return nil }
            guard row[0].text == fingerprint else {
                try db.execute("DELETE FROM failed_downloads WHERE sha256 = ?", [.text(entry.sha256)])
                return nil
            }
            return (row[1].text ?? "", row[2].double ?? 0)
        }
        if let known {
            throw AssetError.verificationFailed("\(entry.id)@\(entry.version): not downloaded again: its bytes failed verification under these catalogs (\(known.reason)); publish a corrected catalog")
        }
    }

    private func checkCancelled(_ job: InstallJob) throws(AssetError) {
        if job.isCancelled { throw .cancelled("install of \(job.key)") }
    }

    /// Test hook: `EARSHOT_TEST_PAUSE=<phase>:<seconds>` holds a job in a phase (crash tests).
    private func pause(at phase: InstallPhase) async throws {
        guard let (pausePhase, seconds) = settings.testPause, pausePhase == phase else { return }
        log("test pause: \(phase.rawValue) for \(seconds) s")
        try await clock.sleep(for: .seconds(seconds))
    }

    /// `staging` becomes `assets/<id>/<version>` by rename (same filesystem), durably.
    static func moveIntoPlace(staging: String, assets: String, id: String, version: Int) throws -> String {
        let parent = assets + "/" + id
        let final = parent + "/\(version)"
        try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        if FileManager.default.fileExists(atPath: final) {
            // An uncommitted leftover of a crashed attempt: nothing refers to it.
            try FileManager.default.removeItem(atPath: final)
        }
        try systemCall("rename(\(staging))") { rename(staging, final) }
        try syncDirectory(parent)
        try syncDirectory(assets)
        return final
    }

    static func syncDirectory(_ path: String) throws {
        let fd = try systemCall("open(\(path))") { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        defer { close(fd) }
        try systemCall("fsync(\(path))") { fsync(fd) }
    }

    /// The download cache file of `entry` (shared by every asset with the same SHA-256).
    func downloadPath(_ entry: CatalogAsset) -> String { settings.downloadsDirectory + "/" + entry.sha256 }

    static func fileSize(_ path: String) -> Int64? {
        var st = stat()
        return stat(path, &st) == 0 ? Int64(st.st_size) : nil
    }

    static func availableBytes(_ path: String) -> Int64 {
        var fs = statvfs()
        guard statvfs(path, &fs) == 0 else { return 0 }
        return Int64(fs.f_bavail) * Int64(fs.f_frsize)
    }

    static func removeDownload(_ path: String) {
        unlink(path)
        unlink(path + ".meta")
    }

    /// Maps the parts' typed errors to asset errors, in one place: any out-of-space condition
    /// (``AssetError/isOutOfSpace(_:)``) is `insufficientStorage`.
    static func map(_ error: any Error, asset: CatalogAsset) -> AssetError {
        let name = "\(asset.id)@\(asset.version)"
        switch error {
        case let e as AssetError: return e
        case let e as DownloadError:
            switch e {
            case .cancelled: return .cancelled("install of \(name)")
            case .insufficientStorage(let needed, let available): return .insufficientStorage(needed: needed, available: available, path: "the download cache")
            case .io(let io) where AssetError.isOutOfSpace(e): return .insufficientStorage(needed: asset.size, available: 0, path: "the download cache (\(io.function))")
            default: return .downloadFailed("\(name): \(e)")
            }
        case let e as ExtractionError:
            if case .io(let io) = e, AssetError.isOutOfSpace(e) {
                return .insufficientStorage(needed: asset.installedSize, available: 0, path: "the asset store (\(io.function))")
            }
            return .verificationFailed("\(name): archive rejected: \(e)")
        case let e as DatabaseError: return AssetError(e, database: "state.db")
        case let e as SystemError where AssetError.isOutOfSpace(e): return .insufficientStorage(needed: asset.installedSize, available: 0, path: "the asset store (\(e.function))")
        case is CancellationError: return .cancelled("install of \(name)")
        default:
            if AssetError.isOutOfSpace(error) { return .insufficientStorage(needed: asset.installedSize, available: 0, path: "the asset store") }
            return .internalError("\(name): \(error)")
        }
    }
}
