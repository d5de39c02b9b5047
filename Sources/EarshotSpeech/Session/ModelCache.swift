import EarshotSystem
import EarshotWire
import Foundation

/// Loaded models shared by every compatible session, kept by retention policy: released when
/// unused (`whileInUse`), kept `LingerSeconds` after last use (`lingering`), or kept while a client
/// connection lives (`processLifetime`). Loads happen once per key however many sessions ask at once.
actor ModelCache {
    struct Entry {
        var model: any SegmentTranscribing
        var memoryBytes: Int
        var users = 0
        /// Unload once unused after this time (`lingering`); nil: unload at once when unused.
        var keepUntil: Double?
        /// Connections that asked for `processLifetime`.
        var pinnedBy: Set<Int> = []
    }

    /// One loaded model as stats report it.
    struct Info: Sendable {
        var key: String
        var users: Int
        var memoryBytes: Int
    }

    private var entries: [String: Entry] = [:]
    private var loading: [String: [CheckedContinuation<any SegmentTranscribing, any Error>]] = [:]
    private(set) var loads = 0
    let lingerSeconds: Double
    let now: @Sendable () -> Double

    init(lingerSeconds: Double, now: @escaping @Sendable () -> Double) {
        self.lingerSeconds = lingerSeconds
        self.now = now
    }

    /// The model for `key`, loading it with `load` (on a dedicated thread) if needed; counts a user.
    func acquire(_ key: String, load: @escaping @Sendable () throws -> (any SegmentTranscribing, Int)) async throws -> any SegmentTranscribing {
        if var entry = entries[key] {
            entry.users += 1
            entries[key] = entry
            return entry.model
        }
        if loading[key] != nil {
            let model = try await withCheckedThrowingContinuation { loading[key, default: []].append($0) }
            entries[key]?.users += 1
            return model
        }
        loading[key] = []
        do {
            let (model, bytes) = try await BlockingWork.run("earshot.load") { try load() }
            loads += 1
            entries[key] = Entry(model: model, memoryBytes: bytes, users: 1)
            for waiter in loading.removeValue(forKey: key) ?? [] { waiter.resume(returning: model) }
            return model
        } catch {
            for waiter in loading.removeValue(forKey: key) ?? [] { waiter.resume(throwing: error) }
            throw error
        }
    }

    /// A session stopped using `key` with `retention`, on behalf of connection `owner`.
    func release(_ key: String, retention: ModelRetention, owner: Int) {
        guard var entry = entries[key] else { return }
        entry.users -= 1
        switch retention {
        case .whileInUse: break
        case .lingering: entry.keepUntil = max(entry.keepUntil ?? 0, now() + lingerSeconds)
        case .processLifetime: entry.pinnedBy.insert(owner)
        }
        entries[key] = entry
        evict()
    }

    /// Connection `owner` closed: its `processLifetime` pins go.
    func ownerGone(_ owner: Int) {
        for key in entries.keys { entries[key]?.pinnedBy.remove(owner) }
        evict()
    }

    /// `SpeechModels.endRetention()`: drop every model no session uses.
    func endRetention() {
        for key in entries.keys {
            entries[key]?.keepUntil = nil
            entries[key]?.pinnedBy = []
        }
        evict()
    }

    /// Unloads unused models whose retention has run out.
    func evict() {
        let time = now()
        entries = entries.filter { _, entry in
            entry.users > 0 || !entry.pinnedBy.isEmpty || (entry.keepUntil.map { $0 > time } ?? false)
        }
    }

    var loaded: [Info] {
        entries.map { Info(key: $0.key, users: $0.value.users, memoryBytes: $0.value.memoryBytes) }.sorted { $0.key < $1.key }
    }
}
