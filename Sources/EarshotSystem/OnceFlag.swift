import Foundation

/// A flag set once and read from any thread (a cancellation, a session's end, its first result).
public final class OnceFlag: @unchecked Sendable {
    // @unchecked: `value` is only touched while holding `lock`.
    private let lock = NSLock()
    private var value = false

    public init() {}

    public func set() { lock.withLock { value = true } }
    public var isSet: Bool { lock.withLock { value } }
}
