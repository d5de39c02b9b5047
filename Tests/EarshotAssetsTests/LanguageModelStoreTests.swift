@testable import EarshotAssets
import EarshotLanguageModel
import EarshotWire
import Foundation
import Testing
import TestSupport

/// Prepared custom language models on disk: per uid and app, reused, bounded, kept across a
/// restart, found only by their uid, and collected with their app's reservations.
@Suite struct LanguageModelStoreTests {
    static func data(version: String = "1", phrase: String = "knight to queen bishop three") throws -> [UInt8] {
        Array(try CustomLanguageModelDocument(locale: "en-US", identifier: "com.example.chess", version: version,
                                              phrases: [.init(phrase: phrase, count: 1)]).encoded())
    }

    static let app = ClientIdentity(uid: 1000, appID: "com.example.chess")

    @Test func aModelIsKeptForItsUidAcrossARestartAndNoOtherUidFindsIt() async throws {
        let directory = try TempDirectory("eslmstore")
        defer { directory.remove() }
        let store = LanguageModelStore(directory: directory.path)
        let (prepared, reused) = try await store.prepare(try Self.data(), for: Self.app, ignoresCache: false)
        #expect(!reused && prepared.words == 5 && prepared.phrases == 1)
        let restarted = LanguageModelStore(directory: directory.path)
        #expect(try await restarted.list(uid: 1000).map(\.model) == [prepared.model])
        #expect(try await restarted.document(prepared.model, uid: 1000).identifier == "com.example.chess")
        await #expect(throws: AssetError.self) { _ = try await restarted.document(prepared.model, uid: 1001) }
        await #expect(throws: AssetError.self) { _ = try await restarted.document("../1000/" + prepared.model, uid: 1001) }
        #expect(try await restarted.list(uid: 1001).isEmpty)
        // The same data for another app of the same uid is that app's own model.
        let other = try await restarted.prepare(try Self.data(), for: ClientIdentity(uid: 1000, appID: "com.example.other"), ignoresCache: false)
        #expect(!other.reused && other.0.model != prepared.model)
    }

    @Test func hostileDataAndAClientIdentifierPastItsBoundAreRefused() async throws {
        let directory = try TempDirectory("eslmstore")
        defer { directory.remove() }
        let store = LanguageModelStore(directory: directory.path)
        for bytes in [[], Array("{}".utf8), Array(repeating: UInt8(ascii: "["), count: 10_000)] {
            await #expect(throws: AssetError.self) { _ = try await store.prepare(bytes, for: Self.app, ignoresCache: false) }
        }
        await #expect(throws: AssetError.self) {
            _ = try await store.prepare(try Self.data(), for: Self.app, ignoresCache: false, clientIdentifier: String(repeating: "x", count: 300))
        }
        #expect(try await store.list(uid: nil).isEmpty)
    }

    /// Inventing app ids does not get a uid more disk: its apps' models share one byte budget.
    @Test func aUsersAppsShareOneByteBudget() async throws {
        let directory = try TempDirectory("eslmstore")
        defer { directory.remove() }
        let first = try await LanguageModelStore(directory: directory.path).prepare(try Self.data(), for: ClientIdentity(uid: 1000, appID: "a"), ignoresCache: false).0
        let size = try #require(try FileManager.default.attributesOfItem(atPath: directory.file("1000/\(first.model).json"))[.size] as? Int)
        // Room for one model and a half.
        let store = LanguageModelStore(directory: directory.path, maximumBytesPerUser: size * 3 / 2)
        do {
            _ = try await store.prepare(try Self.data(), for: ClientIdentity(uid: 1000, appID: "b"), ignoresCache: false)
            Issue.record("a second app's model passed the uid's byte budget")
        } catch AssetError.userQuotaExceeded(let message) {
            #expect(message.contains("uid 1000"), "\(message)")
        }
        // Another uid has a budget of its own; preparing the same model again needs no more room.
        _ = try await store.prepare(try Self.data(), for: ClientIdentity(uid: 1001, appID: "b"), ignoresCache: false)
        #expect(try await store.prepare(try Self.data(), for: ClientIdentity(uid: 1000, appID: "a"), ignoresCache: true).reused == false)
        #expect(try await store.list(uid: 1000).count == 1)
    }

    @Test func unreservedModelsAreCollectedAfterTheGracePeriod() async throws {
        let directory = try TempDirectory("eslmstore")
        defer { directory.remove() }
        let store = LanguageModelStore(directory: directory.path)
        let old = Date(timeIntervalSince1970: 1_000)
        let chess = try await store.prepare(try Self.data(), for: Self.app, ignoresCache: false, now: old).0
        let kept = try await store.prepare(try Self.data(version: "2"), for: Self.app, ignoresCache: false, now: Date(timeIntervalSince1970: 5_000)).0
        let reservation = ReservationInfo(uid: 1000, appId: "com.example.chess", locale: "en-GB", created: 0, lastUsed: 0)
        // Reserved (any locale of the model's language): kept.
        #expect(try await store.collect(keeping: [reservation], preparedBefore: 2_000, dryRun: false).isEmpty)
        // Unreserved: the one prepared before the grace period's cutoff goes; a dry run removes nothing.
        let dry = try await store.collect(keeping: [], preparedBefore: 2_000, dryRun: true)
        #expect(dry.map(\.asset) == ["language-models/1000/\(chess.model)"] && dry[0].reason == "unreserved" && dry[0].bytes > 0)
        #expect(try await store.list(uid: 1000).count == 2)
        _ = try await store.collect(keeping: [], preparedBefore: 2_000, dryRun: false)
        #expect(try await store.list(uid: 1000).map(\.model) == [kept.model])
    }
}
