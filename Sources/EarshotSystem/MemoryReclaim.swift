import CMalloc
import Dispatch
import Foundation

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
