import EarshotAssets
import EarshotSpeech
import EarshotSystem
import Foundation

/// The daemon's Prometheus metrics (`GET /metrics` on the HTTP front, Docs/HTTP.md): counters
/// recorded where things happen (coordinator, error map, HTTP front) and gauges read from the
/// services at scrape time.
final class DaemonMetrics: Sendable {
    let registry = MetricsRegistry()
    private static let latencyBuckets = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

    let sessionsOpened: MetricsRegistry.Family
    let sessionsOpen: MetricsRegistry.Family
    let audioSeconds: MetricsRegistry.Family
    let firstResultSeconds: MetricsRegistry.Family
    let finalResultSeconds: MetricsRegistry.Family
    let errors: MetricsRegistry.Family
    let admissionRefusals: MetricsRegistry.Family
    let httpRequests: MetricsRegistry.Family
    private let modelLoads: MetricsRegistry.Family
    private let modelsLoaded: MetricsRegistry.Family
    private let modelMemory: MetricsRegistry.Family
    private let residentMemory: MetricsRegistry.Family
    private let installedAssets: MetricsRegistry.Family
    private let installedBytes: MetricsRegistry.Family
    private let reservations: MetricsRegistry.Family
    private let catalogVersion: MetricsRegistry.Family

    init() {
        sessionsOpened = registry.family("earshot_sessions_opened_total", "Analysis sessions opened, by the engine of their first module.", kind: .counter, labels: ["engine"])
        sessionsOpen = registry.family("earshot_sessions_open", "Analysis sessions open now.", kind: .gauge)
        audioSeconds = registry.family("earshot_audio_seconds_total", "Seconds of audio given to sessions, by engine.", kind: .counter, labels: ["engine"])
        firstResultSeconds = registry.family("earshot_first_result_seconds", "From opening a session to its first final result.", kind: .histogram,
                                             labels: ["engine"], buckets: Self.latencyBuckets)
        finalResultSeconds = registry.family("earshot_final_result_seconds", "From the end of a session's input (finish) to its last result.", kind: .histogram,
                                             labels: ["engine"], buckets: Self.latencyBuckets)
        errors = registry.family("earshot_errors_total", "Errors sent to clients, by wire code.", kind: .counter, labels: ["code"])
        admissionRefusals = registry.family("earshot_admission_refusals_total", "Requests refused at an admission limit (sessions, connections).", kind: .counter)
        httpRequests = registry.family("earshot_http_requests_total", "HTTP requests by route and status.", kind: .counter, labels: ["route", "status"])
        modelLoads = registry.family("earshot_model_loads_total", "Model loads since start (a shared model loads once).", kind: .counter)
        modelsLoaded = registry.family("earshot_models_loaded", "Models in memory now.", kind: .gauge)
        modelMemory = registry.family("earshot_model_memory_bytes", "Approximate resident memory each loaded model holds.", kind: .gauge, labels: ["model"])
        residentMemory = registry.family("earshot_resident_memory_bytes", "The daemon's resident memory by backing (anonymous: its heap).", kind: .gauge, labels: ["kind"])
        installedAssets = registry.family("earshot_installed_assets", "Installed asset versions, by kind.", kind: .gauge, labels: ["kind"])
        installedBytes = registry.family("earshot_installed_bytes", "Bytes of installed assets.", kind: .gauge)
        reservations = registry.family("earshot_reservations", "Locale reservations held by clients, by locale.", kind: .gauge, labels: ["locale"])
        catalogVersion = registry.family("earshot_catalog_version", "Version of each catalog source in use.", kind: .gauge, labels: ["source"])
    }

    /// Reads the gauges from the services, then writes everything.
    func scrape(speech: SpeechService, assets: AssetService) async -> String {
        let stats = await speech.stats()
        sessionsOpen.set(Double(stats.sessions))
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
        return registry.exposition()
    }
}
