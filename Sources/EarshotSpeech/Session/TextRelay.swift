import Foundation

/// Hands each of a module's recording windows the text of the windows before it
/// (`[Analysis] ConditionOnPreviousText`), on the decode lanes: a window's decode waits for its
/// predecessor's text (nil: no prompt) before it starts, never the session's queue, so the
/// windows decode one at a time in dispatch order while the session keeps reading. The text is
/// everything since the last reset, as faster-whisper prompts with all its text since its last
/// reset (the decoder keeps the end that fits Whisper's prompt): a window that passes nil on (its
/// result needed a high temperature, or its decode failed or never ran) resets it. Every link
/// passes something on, so none waits for ever.
final class TextRelay: @unchecked Sendable {
    // @unchecked: state is guarded by `condition`.
    private let condition = NSCondition()
    private var texts: [Int: String?] = [:]
    private var issued = 0

    /// One window's place in the relay.
    struct Link: Sendable {
        let relay: TextRelay
        let index: Int

        /// Waits for the window before this one to pass the text so far on (nil for the first
        /// window, and after a reset). Blocking: call it on a decode lane.
        func previousText() -> String? {
            guard index > 0 else { return nil }
            return relay.condition.withLock {
                while relay.texts[index - 1] == nil { relay.condition.wait() }
                return relay.texts.removeValue(forKey: index - 1) ?? nil
            }
        }

        /// Passes this window's `text` on to the next, after `previous` (what ``previousText()``
        /// gave this window); nil resets: the next window has no prompt.
        func pass(_ text: String?, after previous: String?) {
            let joined = text.map { TextRelay.joined(previous, $0) }
            relay.condition.withLock {
                relay.texts[index] = .some(joined)
                relay.condition.broadcast()
            }
        }
    }

    /// A window's model whose decodes take the window's earlier text as it comes
    /// (``SegmentTranscribing/transcribe(_:sampleRate:settings:previousText:)``): a model that
    /// can begins before the window before has ended. The text is waited for once.
    final class Prompted: SegmentTranscribing, @unchecked Sendable {
        // @unchecked: `fetched` is guarded by `lock`; a window's decodes run one after another.
        private let model: any SegmentTranscribing
        private let link: Link
        private let lock = NSLock()
        private var fetched: String??

        init(_ model: any SegmentTranscribing, link: Link) {
            self.model = model
            self.link = link
        }

        /// The window's earlier text (``Link/previousText()``, waited for the first time).
        func previousText() -> String? {
            lock.withLock {
                if let fetched { return fetched }
                let text = link.previousText()
                fetched = .some(text)
                return text
            }
        }

        func transcribe(_ samples: [Float], sampleRate: Int, settings: DecodeSettings) throws -> Transcription {
            try model.transcribe(samples, sampleRate: sampleRate, settings: settings, previousText: previousText)
        }

        var isUsable: Bool { model.isUsable }
    }

    /// The most text passed on: its end, about four times what Whisper's 223 prompt tokens take
    /// of English, and still more tokens than that of any other script.
    static let maxCharacters = 4096

    /// `text` after `previous`, its end kept within ``maxCharacters`` (cut at a space when one is near).
    static func joined(_ previous: String?, _ text: String) -> String {
        let whole = previous.map { $0 + " " + text } ?? text
        guard whole.count > maxCharacters else { return whole }
        let end = whole.suffix(maxCharacters)
        guard let space = end.prefix(64).firstIndex(of: " ") else { return String(end) }
        return String(end[end.index(after: space)...])
    }

    /// The next window's link, in dispatch order (on the session's queue).
    func link() -> Link {
        condition.withLock {
            defer { issued += 1 }
            return Link(relay: self, index: issued)
        }
    }
}
