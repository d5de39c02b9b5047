import EarshotAssets
import EarshotSpeech
import EarshotSystem
import Foundation

/// The daemon's Prometheus metrics (`GET /metrics` on the HTTP front, Docs/HTTP.md) and the
/// counters `earshotctl stats` shows: counters recorded where things happen (coordinator, error
/// map, HTTP front, and the asset and speech services through their observer protocols) and
/// gauges read from the services when read (``refresh(speech:assets:)``).
final class DaemonMetrics: AssetObserver {
    let registry = MetricsRegistry()
    private static let latencyBuckets = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]
    private static let realTimeFactorBuckets = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5]

    let sessionsOpened: MetricsRegistry.Family
    let sessionsOpen: MetricsRegistry.Family
    let audioSeconds: MetricsRegistry.Family
    let firstResultSeconds: MetricsRegistry.Family
    let finalResultSeconds: MetricsRegistry.Family
    let errors: MetricsRegistry.Family
    let admissionRefusals: MetricsRegistry.Family
    let httpRequests: MetricsRegistry.Family
    let httpSlowClients: MetricsRegistry.Family
    private let realTimeFactor: MetricsRegistry.Family
    private let speechWithoutText: MetricsRegistry.Family
    private let speechWithoutTextSeconds: MetricsRegistry.Family
    private let engineSessions: MetricsRegistry.Family
    private let modelLoads: MetricsRegistry.Family
    private let modelsLoaded: MetricsRegistry.Family
    private let modelMemory: MetricsRegistry.Family
    private let residentMemory: MetricsRegistry.Family
    private let installJobsStarted: MetricsRegistry.Family
    private let installJobsEnded: MetricsRegistry.Family
    private let downloadedBytes: MetricsRegistry.Family
    private let verificationFailures: MetricsRegistry.Family
    private let gcRuns: MetricsRegistry.Family
    private let gcFreedBytes: MetricsRegistry.Family
    private let installedAssets: MetricsRegistry.Family
    private let installedBytes: MetricsRegistry.Family
    private let reservations: MetricsRegistry.Family
    private let catalogVersion: MetricsRegistry.Family
    private let catalogAge: MetricsRegistry.Family

    init() {
        sessionsOpened = registry.family("earshot_sessions_opened_total", "Analysis sessions opened, by the engine of their first module.", kind: .counter, labels: ["engine"])
        sessionsOpen = registry.family("earshot_sessions_open", "Analysis sessions open now.", kind: .gauge)
        engineSessions = registry.family("earshot_engine_sessions_open", "Analysis sessions open now using each engine (a session on two engines counts under both).", kind: .gauge, labels: ["engine"])
        audioSeconds = registry.family("earshot_audio_seconds_total", "Seconds of audio given to sessions, by engine.", kind: .counter, labels: ["engine"])
        realTimeFactor = registry.family("earshot_real_time_factor", "Engine compute time per second of audio, per decoded segment (Whisper) or utterance (PocketSphinx).", kind: .histogram,
                                         labels: ["engine"], buckets: Self.realTimeFactorBuckets)
        speechWithoutText = registry.family("earshot_speech_without_text_total", "Stretches of detected speech a transcriber gave no text for, even decoded again (each also logged).", kind: .counter)
        speechWithoutTextSeconds = registry.family("earshot_speech_without_text_seconds_total", "Seconds of detected speech a transcriber gave no text for.", kind: .counter)
        firstResultSeconds = registry.family("earshot_first_result_seconds", "From opening a session to its first final result.", kind: .histogram,
                                             labels: ["engine"], buckets: Self.latencyBuckets)
        finalResultSeconds = registry.family("earshot_final_result_seconds", "From the end of a session's input (finish) to its last result.", kind: .histogram,
                                             labels: ["engine"], buckets: Self.latencyBuckets)
        errors = registry.family("earshot_errors_total", "Errors sent to clients, by wire code.", kind: .counter, labels: ["code"])
        admissionRefusals = registry.family("earshot_admission_refusals_total", "Requests refused at an admission limit (sessions, connections).", kind: .counter)
        httpSlowClients = registry.family("earshot_http_slow_clients_total", "HTTP connections cut for sending too slowly, by rule (headers, body_rate, upload_time).", kind: .counter,
                                          labels: ["rule"])
        httpRequests = registry.family("earshot_http_requests_total", "HTTP requests by route and status.", kind: .counter, labels: ["route", "status"])
        modelLoads = registry.family("earshot_model_loads_total", "Model loads since start (a shared model loads once).", kind: .counter)
        modelsLoaded = registry.family("earshot_models_loaded", "Models in memory now: shared ones, and per-session decoders once per asset.", kind: .gauge)
        modelMemory = registry.family("earshot_model_memory_bytes", "Approximate resident memory each loaded model holds (per-session decoders: all sessions' together).", kind: .gauge, labels: ["model"])
        residentMemory = registry.family("earshot_resident_memory_bytes", "The daemon's resident memory by backing (anonymous: its heap).", kind: .gauge, labels: ["kind"])
        installJobsStarted = registry.family("earshot_install_jobs_started_total", "Install jobs started (one per asset version, shared by its waiters), by kind (install, update).", kind: .counter, labels: ["kind"])
        installJobsEnded = registry.family("earshot_install_jobs_finished_total", "Install jobs ended, by kind and result (succeeded, failed, cancelled, interrupted by shutdown).", kind: .counter,
                                           labels: ["kind", "result"])
        downloadedBytes = registry.family("earshot_download_bytes_total", "Bytes of asset downloads received over the network.", kind: .counter)
        verificationFailures = registry.family("earshot_verification_failures_total", "Verification failures, by check (hash: a download's size or SHA-256; archive: extraction refused it; signature: a catalog's).", kind: .counter, labels: ["check"])
        gcRuns = registry.family("earshot_gc_runs_total", "Garbage collections run (periodic and requested; not dry runs).", kind: .counter)
        gcFreedBytes = registry.family("earshot_gc_freed_bytes_total", "Bytes garbage collection removed (asset versions and orphaned downloads).", kind: .counter)
        installedAssets = registry.family("earshot_installed_assets", "Installed asset versions, by kind.", kind: .gauge, labels: ["kind"])
        installedBytes = registry.family("earshot_installed_bytes", "Bytes of installed assets.", kind: .gauge)
        reservations = registry.family("earshot_reservations", "Locale reservations held by clients, by locale.", kind: .gauge, labels: ["locale"])
        catalogVersion = registry.family("earshot_catalog_version", "Version of each catalog source in use.", kind: .gauge, labels: ["source"])
        catalogAge = registry.family("earshot_catalog_age_seconds", "Seconds since this daemon fetched the catalog version in use, by source.", kind: .gauge, labels: ["source"])
        // Known label values start at zero, so a first failure is a change a rate() sees.
        for check in VerificationCheck.allCases { verificationFailures.add(0, check.rawValue) }
        for kind in ["install", "update"] { installJobsStarted.add(0, kind) }
        for rule in ["headers", "body_rate", "upload_time"] { httpSlowClients.add(0, rule) }
        for counter in [downloadedBytes, gcRuns, gcFreedBytes, admissionRefusals, speechWithoutText, speechWithoutTextSeconds] { counter.add(0) }
    }

    /// Reads the gauges from the services; returns the speech statistics they came from.
    @discardableResult
    func refresh(speech: SpeechService, assets: AssetService) async -> SpeechStats {
        let stats = await speech.stats()
        sessionsOpen.set(Double(stats.sessions))
        engineSessions.replace(Dictionary(uniqueKeysWithValues: stats.sessionsByEngine.map { ([$0.key], Double($0.value)) }))
        modelLoads.set(Double(stats.loads))
        modelsLoaded.set(Double(stats.models.count))
        modelMemory.replace(Dictionary(stats.models.map { ([$0.key], Double($0.memoryBytes)) }, uniquingKeysWith: +))
        await MemoryReclaim.settled()
        let memory = ProcessFacts.residentMemory()
        residentMemory.replace([["anonymous"]: Double(memory.anonymousBytes), ["file"]: Double(memory.fileBytes)])
        if let installed = try? await assets.installedAssets() {
            installedAssets.replace(Dictionary(installed.map { ([$0.entry.kind.rawValue], 1.0) }, uniquingKeysWith: +))
            installedBytes.set(Double(installed.reduce(0) { $0 + $1.bytes }))
        }
        if let held = try? await assets.reservations(of: nil) {
            reservations.replace(Dictionary(held.map { ([$0.locale], 1.0) }, uniquingKeysWith: +))
        }
        let sources = await assets.catalogSummary().sources
        catalogVersion.replace(Dictionary(sources.compactMap { source in source.version.map { ([source.url], Double($0)) } }, uniquingKeysWith: max))
        catalogAge.replace(Dictionary(uniqueKeysWithValues: await assets.catalogAges().map { ([$0.key], $0.value.rounded()) }))
        return stats
    }

    /// Everything in Prometheus' text format, the gauges read first.
    func scrape(speech: SpeechService, assets: AssetService) async -> String {
        await refresh(speech: speech, assets: assets)
        return registry.exposition()
    }

    // MARK: - Speech (through SpeechReports)

    func decoded(engine: String, audioSeconds: Double, computeSeconds: Double) {
        guard audioSeconds > 0 else { return }
        realTimeFactor.observe(computeSeconds / audioSeconds, engine)
    }

    func lostSpeech(seconds: Double) {
        speechWithoutText.add(1)
        speechWithoutTextSeconds.add(seconds)
    }

    // MARK: - AssetObserver

    func installJobStarted(isUpdate: Bool) {
        installJobsStarted.add(1, isUpdate ? "update" : "install")
    }

    func installJobEnded(isUpdate: Bool, result: InstallJobResult) {
        installJobsEnded.add(1, isUpdate ? "update" : "install", result.rawValue)
    }

    func downloaded(bytes: Int64) { downloadedBytes.add(Double(bytes)) }

    func verificationFailed(_ check: VerificationCheck) { verificationFailures.add(1, check.rawValue) }

    func garbageCollected(freedBytes: Int64) {
        gcRuns.add()
        gcFreedBytes.add(Double(freedBytes))
    }
}
