import EarshotSystem
import EarshotWire
import Foundation

/// Loaded models shared by every compatible session, kept by retention policy: released when
/// unused (`whileInUse`), kept `LingerSeconds` after last use (`lingering`), or kept while a client
/// connection lives (`processLifetime`). Loads happen once per key however many sessions ask at once.
/// Retention is recorded per user, so `endRetention(uid:)` drops only what that user asked to keep.
/// ``runEvictor()`` unloads a lingering model when its time is up, sleeping on the injected clock.
/// Finished sessions' voice activity detectors are kept for the next session while any model is.
/// With a memory budget, loaded models stay within it: before a load would pass it, idle models
/// (no session uses them, whatever their retention) are unloaded least recently used first, and a
/// load that still cannot fit is refused (``SpeechError/modelMemory(needed:budget:inUse:)``).
actor ModelCache {
    struct Entry {
        var model: any SegmentTranscribing
        var memoryBytes: Int
        /// The weights it was loaded from (an asset): loads of them measure what the next costs.
        var family: String
        /// When a session last took or gave it back (``ServiceClock/elapsed``).
        var lastUsed: Duration
        var users = 0
        /// Per uid: keep the model until this time of the clock (``ServiceClock/elapsed``) once
        /// unused (`lingering`).
        var lingerUntil: [UInt32: Duration] = [:]
        /// Connections that asked for `processLifetime`, with their uid.
        var pinnedBy: [SessionOwner: UInt32] = [:]
    }

    /// One loaded model as stats report it.
    struct Info: Sendable {
        var key: String
        var users: Int
        var memoryBytes: Int
    }

    private var entries: [String: Entry] = [:]
    /// Voice activity detectors of finished sessions, reset, for the next session with the same
    /// settings; kept only while a model is loaded (they go with the last one), at most
    /// ``maxSpareDetectors``.
    private var spareDetectors: [SileroDetector.Configuration: [SileroDetector]] = [:]
    static let maxSpareDetectors = 4
    private var loading: [String: [CheckedContinuation<any SegmentTranscribing, any Error>]] = [:]
    private(set) var loads = 0
    let linger: Duration
    let clock: any ServiceClock
    /// Wakes the evictor when a lingering deadline is set.
    private let deadlineSet: AsyncStream<Void>.Continuation
    private let deadlines: AsyncStream<Void>

    /// Most bytes loaded models may take together (nil: no budget).
    let memoryBudget: Int?
    /// Bytes the loads under way are expected to take.
    private var loadingBytes = 0
    /// What a model of each family took when last loaded.
    private var measured: [String: Int] = [:]

    init(lingerSeconds: Double, clock: any ServiceClock, memoryBudget: Int? = nil) {
        linger = .seconds(lingerSeconds)
        self.clock = clock
        self.memoryBudget = memoryBudget
        (deadlines, deadlineSet) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// The model for `key`, loading it with `load` (on a dedicated thread) if needed; counts a user.
    /// A load is expected to take what the last model of `family` took, else `estimate` bytes;
    /// idle models make room for it within the budget, or it is refused.
    func acquire(_ key: String, family: String? = nil, estimate: Int = 0,
                 load: @escaping @Sendable () throws -> (any SegmentTranscribing, Int)) async throws -> any SegmentTranscribing {
        let family = family ?? key
        if let entry = entries[key], !entry.model.isUsable {
            // Its engine process ended (crashed): the sessions using it fail, the next one reloads.
            entries[key] = nil
        }
        if var entry = entries[key] {
            entry.users += 1
            entry.lastUsed = clock.elapsed
            entries[key] = entry
            return entry.model
        }
        if loading[key] != nil {
            let model = try await withCheckedThrowingContinuation { loading[key, default: []].append($0) }
            entries[key]?.users += 1
            return model
        }
        let expected = measured[family] ?? estimate
        try makeRoom(for: expected)
        loading[key] = []
        loadingBytes += expected
        defer { loadingBytes -= expected }
        do {
            let (model, bytes) = try await BlockingWork.run("earshot.load") { try load() }
            loads += 1
            measured[family] = bytes
            entries[key] = Entry(model: model, memoryBytes: bytes, family: family, lastUsed: clock.elapsed, users: 1)
            for waiter in loading.removeValue(forKey: key) ?? [] { waiter.resume(returning: model) }
            return model
        } catch {
            for waiter in loading.removeValue(forKey: key) ?? [] { waiter.resume(throwing: error) }
            throw error
        }
    }

    /// Unloads idle models, least recently used first, until `bytes` more fit within the budget;
    /// throws when the models in use (and the loads under way) leave no room.
    private func makeRoom(for bytes: Int) throws(SpeechError) {
        guard let budget = memoryBudget else { return }
        func used() -> Int { entries.values.reduce(loadingBytes) { $0 + $1.memoryBytes } }
        let idle = entries.filter { $0.value.users == 0 }.sorted { $0.value.lastUsed < $1.value.lastUsed }.map(\.key)
        for key in idle where used() + bytes > budget { entries[key] = nil }
        guard used() + bytes <= budget || entries.isEmpty && loadingBytes == 0 else {
            throw .modelMemory(needed: bytes, budget: budget, inUse: used())
        }
        if entries.isEmpty { spareDetectors = [:] }
    }

    /// A session stopped using `key` with `retention`, on behalf of connection `owner` of user `uid`.
    /// A `keepAlive` (with `lingering`) replaces that user's deadline instead of extending it, as
    /// Ollama's `keep_alive` does: zero lets the model go as soon as nobody uses it.
    func release(_ key: String, retention: ModelRetention, keepAlive: Duration? = nil, owner: SessionOwner, uid: UInt32) {
        guard var entry = entries[key] else { return }
        entry.users -= 1
        entry.lastUsed = clock.elapsed
        switch retention {
        case .whileInUse: break
        case .lingering:
            let until = clock.elapsed + (keepAlive ?? linger)
            entry.lingerUntil[uid] = keepAlive == nil ? max(entry.lingerUntil[uid] ?? .zero, until) : until
            deadlineSet.yield()
        case .processLifetime: entry.pinnedBy[owner] = uid
        }
        entries[key] = entry
        evict()
    }

    /// Connection `owner` closed: its `processLifetime` pins go.
    func ownerGone(_ owner: SessionOwner) {
        for key in entries.keys { entries[key]?.pinnedBy[owner] = nil }
        evict()
    }

    /// `SpeechModels.endRetention()` for user `uid`: drops what that user's sessions asked to keep
    /// (lingering and process-lifetime retention); models other users keep, or sessions use, stay.
    func endRetention(uid: UInt32) {
        for (key, var entry) in entries {
            entry.lingerUntil[uid] = nil
            entry.pinnedBy = entry.pinnedBy.filter { $0.value != uid }
            entries[key] = entry
        }
        evict()
    }

    /// Unloads unused models whose retention has run out.
    func evict() {
        let time = clock.elapsed
        entries = entries.filter { _, entry in
            entry.users > 0 || !entry.pinnedBy.isEmpty || entry.lingerUntil.values.contains { $0 > time }
        }
        if entries.isEmpty { spareDetectors = [:] }
    }

    /// Spare detectors kept now.
    var spareDetectorCount: Int { spareDetectors.values.reduce(0) { $0 + $1.count } }

    /// A spare detector with `configuration`, taken out of the pool (nil: load a new one).
    func spareDetector(for configuration: SileroDetector.Configuration) -> SileroDetector? {
        while let spare = spareDetectors[configuration]?.popLast() {
            if spare.isUsable { return spare }
        }
        return nil
    }

    /// Keeps a finished session's reset detector for the next session, while any model is loaded.
    func keepSpare(_ detector: SileroDetector) {
        guard !entries.isEmpty, spareDetectorCount < Self.maxSpareDetectors else { return }
        spareDetectors[detector.configuration, default: []].append(detector)
    }

    /// The earliest lingering deadline of a model nobody uses.
    private var nextExpiry: Duration? {
        entries.values.filter { $0.users == 0 }.flatMap(\.lingerUntil.values).min()
    }

    /// Unloads lingering models as their deadlines pass, sleeping on the clock until the earliest
    /// one (or until one is set); returns when the task is cancelled.
    func runEvictor() async {
        var waiting = deadlines.makeAsyncIterator()
        while !Task.isCancelled {
            evict()
            if let next = nextExpiry {
                try? await clock.sleep(for: next - clock.elapsed)
            } else if await waiting.next() == nil {
                return
            }
        }
    }

    var loaded: [Info] {
        entries.map { Info(key: $0.key, users: $0.value.users, memoryBytes: $0.value.memoryBytes) }.sorted { $0.key < $1.key }
    }
}
