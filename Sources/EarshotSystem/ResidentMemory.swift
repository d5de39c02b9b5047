import CMalloc
import Dispatch
import Foundation

/// Resident memory by backing: anonymous pages are the process's own heap (what a leak grows);
/// file-backed pages are mostly shared libraries and mapped model files, which the kernel can drop.
public struct ResidentMemory: Sendable, Hashable {
    public var anonymousBytes: Int
    public var fileBytes: Int
    public var sharedMemoryBytes: Int
}
