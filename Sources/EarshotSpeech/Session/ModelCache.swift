import EarshotSystem
import EarshotWire
import Foundation

/// Loaded models shared by every compatible session, kept by retention policy: released when
/// unused (`whileInUse`), kept `LingerSeconds` after last use (`lingering`), or kept while a client
/// connection lives (`processLifetime`). Loads happen once per key however many sessions ask at once.
/// Retention is recorded per user, so `endRetention(uid:)` drops only what that user asked to keep.
/// ``runEvictor()`` unloads a lingering model when its time is up, sleeping on the injected clock.
/// Finished sessions' voice activity detectors are kept for the next session while any model is.
actor ModelCache {
    struct Entry {
        var model: any SegmentTranscribing
        var memoryBytes: Int
        var users = 0
        /// Per uid: keep the model until this time of the clock (``ServiceClock/elapsed``) once
        /// unused (`lingering`).
        var lingerUntil: [UInt32: Duration] = [:]
        /// Connections that asked for `processLifetime`, with their uid.
        var pinnedBy: [Int: UInt32] = [:]
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

    init(lingerSeconds: Double, clock: any ServiceClock) {
        linger = .seconds(lingerSeconds)
        self.clock = clock
        (deadlines, deadlineSet) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// The model for `key`, loading it with `load` (on a dedicated thread) if needed; counts a user.
    func acquire(_ key: String, load: @escaping @Sendable () throws -> (any SegmentTranscribing, Int)) async throws -> any SegmentTranscribing {
        if let entry = entries[key], !entry.model.isUsable {
            // Its engine process ended (crashed): the sessions using it fail, the next one reloads.
            entries[key] = nil
        }
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

    /// A session stopped using `key` with `retention`, on behalf of connection `owner` of user `uid`.
    /// A `keepAlive` (with `lingering`) replaces that user's deadline instead of extending it, as
    /// Ollama's `keep_alive` does: zero lets the model go as soon as nobody uses it.
    func release(_ key: String, retention: ModelRetention, keepAlive: Duration? = nil, owner: Int, uid: UInt32) {
        guard var entry = entries[key] else { return }
        entry.users -= 1
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
    func ownerGone(_ owner: Int) {
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
