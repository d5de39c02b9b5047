import Earshot
import EarshotLanguageModel
import EarshotWire
import Foundation
import Testing
import TestSupport

/// A prepared custom language model's life in a real daemon: it survives a restart, garbage
/// collection keeps it while its app reserves a locale of its language, and removes it once the
/// reservation is released (grace period 0 here).
@Suite(.serialized, .enabled(if: EmbeddedModels.runs(EmbeddedModels.catalogLists("pocketsphinx-en-us")), "needs the embedded catalog (Scripts/setup.sh)"))
struct PreparedLanguageModelLifecycleTests {
    static let config = "[Assets]\nGCGracePeriodSec=0\n"

    @Test func aModelOutlivesARestartAndIsCollectedOnceItsReservationIsReleased() async throws {
        let first = try await TestDaemon(config: Self.config)
        var second: TestDaemon?
        do {
            let data = Array(try CustomLanguageModelDocument(locale: "en-US", identifier: "com.example.chess", version: "1",
                                                             phrases: [.init(phrase: "knight to queen bishop 3", count: 1)]).encoded())
            let app = "com.example.chess-app"
            var connection = try await DaemonConnection.connect(socket: first.socket, appID: app)
            _ = try await connection.request(ReserveRequest(locale: "en-US"), expecting: ReserveReply.self)
            let model = try await connection.request(PrepareLanguageModelRequest(), payload: data, expecting: PrepareLanguageModelReply.self).prepared.model
            await connection.close()
            _ = await first.terminate()

            // The same state directory, a new daemon.
            let restarted = try await TestDaemon(config: Self.config, arguments: ["--state-dir", first.directory.file("state")])
            second = restarted
            connection = try await DaemonConnection.connect(socket: restarted.socket, appID: app)
            #expect(try await connection.request(LanguageModelsRequest(), expecting: LanguageModelsReply.self).models.map(\.model) == [model])
            let kept = try await connection.request(GCRequest(), expecting: GCReply.self)
            #expect(!kept.removed.contains { $0.asset.hasPrefix("language-models/") }, "\(kept.removed)")
            _ = try await connection.request(ReleaseRequest(locale: "en-US"), expecting: ReleaseReply.self)
            let collected = try await connection.request(GCRequest(), expecting: GCReply.self)
            #expect(collected.removed.contains { $0.asset == "language-models/\(getuid())/\(model)" && $0.reason == "unreserved" }, "\(collected.removed)")
            #expect(try await connection.request(LanguageModelsRequest(), expecting: LanguageModelsReply.self).models.isEmpty)
            await connection.close()
        } catch {
            await second?.cleanUp()
            await first.cleanUp()
            throw error
        }
        await second?.cleanUp()
        await first.cleanUp()
    }
}
