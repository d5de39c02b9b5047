import EarshotWire
import Foundation
import Testing
import TestSupport

/// `earshotctl stats` and `earshot.stats` (issue 9 item 10, issue 12 item 4): sessions by engine,
/// PocketSphinx's per-session decoders among the models, and the metrics' own counters.
@Suite(.serialized, .speechDaemon(modules: ["dictation"]))
struct StatsTests {
    /// Regression (issue 9, item 10): `stats` showed no PocketSphinx sessions or models, because its
    /// decoders are per session and not in the shared model cache.
    @Test func statsShowsPocketSphinxSessionsAndModels() async throws {
        let daemon = try SpeechDaemon.shared()
        let connection = try TestConnection(daemon.socket)
        defer { connection.close() }
        try await connection.hello("org.example.stats")
        let before = try await PrometheusScrape.scrape(PrometheusScrape.socket(of: daemon), in: daemon.directory)
        var session = try await WireSession.opened(connection, [SpeechFixtures.dictation()])
        let samples = try SpeechFixtures.samples(SpeechFixtures.ids[0])
        try await session.send(samples)

        let stats = try await connection.stats()
        #expect(stats.sessions == 1)
        #expect(stats.sessionsByEngine == ["pocketsphinx": 1], "\(String(describing: stats.sessionsByEngine))")
        let decoder = try #require(stats.models.first { $0.key.hasPrefix("pocketsphinx-en-us@") }, "\(stats.models)")
        #expect(decoder.key.hasSuffix("/per-session") && decoder.users == 1)
        #expect(decoder.memoryBytes > 1 << 20, "the decoder's model files are tens of MB")
        let text = try await ChildProcess.run(BuiltProducts.path("earshotctl"), ["--socket", daemon.socket, "stats"], in: daemon.directory)
        #expect(text.status == 0)
        #expect(text.stdout.contains("1 (pocketsphinx 1)"), "\(text.stdout)")
        #expect(text.stdout.contains(decoder.key), "\(text.stdout)")

        try await session.finish()
        #expect(!session.finalText().isEmpty)
        let after = try await PrometheusScrape.scrape(PrometheusScrape.socket(of: daemon), in: daemon.directory)
        // Each utterance PocketSphinx decoded is one real-time factor observation.
        let rtf = #"earshot_real_time_factor_count{"engine": "pocketsphinx"}"#
        #expect(after[rtf, default: 0] > before[rtf, default: 0], "\(after.keys.filter { $0.hasPrefix("earshot_real_time_factor") })")
        #expect(after[#"earshot_sessions_opened_total{"engine": "pocketsphinx"}"#, default: 0] == before[#"earshot_sessions_opened_total{"engine": "pocketsphinx"}"#, default: 0] + 1)
        let idle = try await connection.pollStats { $0.sessions == 0 }
        #expect(idle.sessionsByEngine == [:] && !idle.models.contains { $0.key.hasSuffix("/per-session") }, "\(idle.models)")
    }
}
