import CMalloc
import Dispatch
import Foundation

/// Facts about the running process read from `/proc/self`.
public enum ProcessFacts {
    /// Resident set size in bytes, from `/proc/self/statm` (0 where unavailable).
    public static func residentBytes() -> Int {
        guard let text = read("/proc/self/statm") else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// The resident set of this process (or of process `pid`) split by what backs it, from
    /// `/proc/…/status` (zeros where unavailable).
    public static func residentMemory(pid: Int32? = nil) -> ResidentMemory {
        var memory = ResidentMemory(anonymousBytes: 0, fileBytes: 0, sharedMemoryBytes: 0)
        for line in (read("/proc/\(pid.map(String.init) ?? "self")/status") ?? "").split(separator: "\n") {
            let parts = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard parts.count >= 2, let kibibytes = Int(parts[1]) else { continue }
            switch parts[0] {
            case "RssAnon:": memory.anonymousBytes = kibibytes << 10
            case "RssFile:": memory.fileBytes = kibibytes << 10
            case "RssShmem:": memory.sharedMemoryBytes = kibibytes << 10
            default: break
            }
        }
        return memory
    }

    /// The directory of the running executable.
    public static var executableDirectory: String {
        let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return (me as NSString).deletingLastPathComponent
    }

    private static func read(_ path: String) -> String? {
        // /proc files report size 0, so read to the end rather than by size.
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        return (try? handle.readToEnd()).map { String(decoding: $0, as: UTF8.self) }
    }
}

/// Resident memory by backing: anonymous pages are the process's own heap (what a leak grows);
/// file-backed pages are mostly shared libraries and mapped model files, which the kernel can drop.
public struct ResidentMemory: Sendable, Hashable {
    public var anonymousBytes: Int
    public var fileBytes: Int
    public var sharedMemoryBytes: Int
}

/// Gives freed heap memory back to the kernel.
///
/// glibc keeps freed pages in the arena of the thread that allocated them. Engines allocate
/// hundreds of MiB on whichever worker thread loaded or decoded (a PocketSphinx decoder ~95 MB,
/// ONNX Runtime's working memory ~100 MiB), so without a trim the resident set ratchets up with
/// every load/free cycle. `afterRelease()` queues one `malloc_trim` (coalesced: any number of
/// releases before it runs cost one trim) on a utility queue, never on the cooperative pool;
/// `settled()` waits for queued trims, so a memory report made after it counts what was given back.
public enum MemoryReclaim {
    private static let queue = DispatchQueue(label: "earshot.memory-reclaim", qos: .utility)
    private static let pending = Pending()

    /// Keeps large allocations returnable; call once before engines load (idempotent). glibc
    /// raises its mmap threshold to the largest block freed (up to 32 MiB), so after ONNX Runtime
    /// frees its first big buffers, later ones come from thread arenas, whose free top `malloc_trim`
    /// never returns: 75–110 MiB stayed anonymous after a model was unloaded. A fixed 128 KiB
    /// threshold maps such blocks separately, so freeing them gives them back at once. Blocks of
    /// `bytes` or more are mapped (the default suits earshotd; the engine process passes a larger
    /// one, see `EngineServer.mmapThreshold`), and an arena keeps up to as much free at its top
    /// before giving it back, so a block freed and allocated again is not faulted in again
    /// (`afterRelease()`'s trim returns it all); calling it again sets both again.
    public static func keepLargeBlocksReturnable(above bytes: Int = defaultThreshold) {
        _ = mallopt(M_MMAP_THRESHOLD, Int32(bytes))
        _ = mallopt(M_TRIM_THRESHOLD, Int32(bytes))
    }

    /// earshotd's threshold: 128 KiB, glibc's initial one, kept from rising.
    public static let defaultThreshold = 128 << 10

    /// Call after freeing a large engine object.
    public static func afterRelease() {
        guard pending.mark() else { return }
        queue.async {
            pending.clear()
            malloc_trim(0)
        }
    }

    /// Returns once every trim queued before the call has run.
    public static func settled() async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in queue.async { done.resume() } }
    }

    private final class Pending: @unchecked Sendable {
        private let lock = NSLock()
        private var queued = false
        /// Whether this call queued the trim (false: one is already waiting).
        func mark() -> Bool { lock.withLock { defer { queued = true }; return !queued } }
        func clear() { lock.withLock { queued = false } }
    }
}
