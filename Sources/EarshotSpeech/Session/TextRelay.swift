import Foundation

/// Hands each of a module's recording windows the text of the window before it
/// (`[Analysis] ConditionOnPreviousText`), on the decode lanes: a window's decode waits for its
/// predecessor's text (nil: no prompt) before it starts, never the session's queue, so the
/// windows decode one at a time in dispatch order while the session keeps reading. Every link
/// passes something on — its text, or nil when its decode failed or never ran — so none waits
/// for ever.
final class TextRelay: @unchecked Sendable {
    // @unchecked: state is guarded by `condition`.
    private let condition = NSCondition()
    private var texts: [Int: String?] = [:]
    private var issued = 0

    /// One window's place in the relay.
    struct Link: Sendable {
        let relay: TextRelay
        let index: Int

        /// Waits for the window before this one to pass its text on (nil for the first window).
        /// Blocking: call it on a decode lane.
        func previousText() -> String? {
            guard index > 0 else { return nil }
            return relay.condition.withLock {
                while relay.texts[index - 1] == nil { relay.condition.wait() }
                return relay.texts.removeValue(forKey: index - 1) ?? nil
            }
        }

        /// Passes this window's text on to the next (nil: no prompt).
        func pass(_ text: String?) {
            relay.condition.withLock {
                relay.texts[index] = .some(text)
                relay.condition.broadcast()
            }
        }
    }

    /// The next window's link, in dispatch order (on the session's queue).
    func link() -> Link {
        condition.withLock {
            defer { issued += 1 }
            return Link(relay: self, index: issued)
        }
    }
}
