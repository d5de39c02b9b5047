import CTerminal
import Dispatch
import Foundation

/// How a terminal lays text out: the columns each character takes (libc's `wcwidth`: 2 for wide
/// characters, 0 for combining ones) and the rows a string takes when the terminal wraps it.
public enum TerminalText {
    /// Columns `scalar` takes on a terminal (control characters: 0).
    public static func columns(_ scalar: Unicode.Scalar) -> Int {
        let width = Int(earshot_wcwidth(scalar.value))
        return width < 0 ? (scalar.value < 0x20 || scalar.value == 0x7f ? 0 : 1) : width
    }

    /// Columns `text` takes on one row.
    public static func columns(_ text: String) -> Int { text.unicodeScalars.reduce(0) { $0 + columns($1) } }

    /// Rows `text` takes starting at the first column of a row `width` columns wide (0 for
    /// nothing): a wide character that does not fit at the end of a row goes to the next one.
    public static func rows(_ text: String, width: Int) -> Int {
        let width = max(1, width)
        var rows = 0
        var column = 0
        for scalar in text.unicodeScalars {
            let size = columns(scalar)
            if size == 0 { continue }
            if rows == 0 || column + size > width {
                rows += 1
                column = 0
            }
            column += size
        }
        return rows
    }

    /// The end of `text` that fits in `maxRows` rows of `width` columns, starting with "…" when
    /// cut (never within a grapheme).
    public static func tail(_ text: String, width: Int, maxRows: Int) -> String {
        guard rows(text, width: width) > maxRows else { return text }
        let characters = Array(text)
        // The rows a suffix takes only shrink as it shortens: find the longest that fits.
        var low = 1, high = characters.count
        while low < high {
            let middle = (low + high) / 2
            if rows("…" + String(characters[middle...]), width: width) <= maxRows { high = middle } else { low = middle + 1 }
        }
        return "…" + String(characters[low...])
    }

    /// `text` on one logical line: control characters (newlines, tabs) become spaces.
    public static func flattened(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7f ? " " : $0 }))
    }
}

/// A live transcript on a terminal: final text is written once and never redrawn; the volatile
/// text of the speech still open is drawn after it (dim when styled) and redrawn in place — the
/// cursor goes back up over every row its last drawing wrapped onto and erases each — so a
/// paragraph that wraps is never repeated. Volatile text longer than the screen shows
/// its end only ("…" first), so the rows it takes can always be reached again. Without cursor
/// control (`TERM=dumb`, not a terminal) only final text is written, as when piped. Thread-safe.
public final class LiveTranscriptRenderer: @unchecked Sendable {
    // Unchecked: state is guarded by `lock`.
    public struct Terminal: Sendable, Hashable {
        public var columns: Int
        public var rows: Int
        /// Cursor movement is allowed (volatile text is shown at all).
        public var cursor: Bool
        /// Volatile text may be dim (no `NO_COLOR`).
        public var styled: Bool

        public init(columns: Int, rows: Int, cursor: Bool = true, styled: Bool = true) {
            self.columns = columns
            self.rows = rows
            self.cursor = cursor
            self.styled = styled
        }
    }

    private let lock = NSLock()
    private var terminal: Terminal
    /// Writes to the terminal (escape sequences and volatile text).
    private let screen: @Sendable (String) -> Void
    /// Writes final text (the terminal too, or a pipe).
    private let finals: @Sendable (String) -> Void
    /// The volatile text on screen and the rows it takes (0: none).
    private var drawn = ""
    private var drawnRows = 0
    /// Follows the terminal's size (`SIGWINCH`), for a renderer on this process's terminal.
    private var resizes: (any DispatchSourceSignal)?

    public init(terminal: Terminal, screen: @escaping @Sendable (String) -> Void, finals: @escaping @Sendable (String) -> Void) {
        self.terminal = terminal
        self.screen = screen
        self.finals = finals
    }

    /// Shows `text` as the volatile text, replacing what was shown.
    public func show(_ text: String) {
        lock.withLock {
            guard terminal.cursor else { return }
            let shown = TerminalText.tail(TerminalText.flattened(text), width: terminal.columns, maxRows: max(1, terminal.rows - 1))
            guard shown != drawn else { return }
            var output = erase()
            if !shown.isEmpty { output += terminal.styled ? "\u{1B}[2m\(shown)\u{1B}[0m" : shown }
            drawn = shown
            drawnRows = TerminalText.rows(shown, width: terminal.columns)
            screen(output)
        }
    }

    /// Writes `text` as final, once, on its own line (the volatile text goes first).
    public func commit(_ text: String) {
        lock.withLock {
            clearVolatile()
            guard !text.isEmpty else { return }
            finals(text + "\n")
        }
    }

    /// The terminal's size changed: the terminal has rewrapped what is on it (as tmux, VTE,
    /// kitty and alacritty do), so the volatile text now takes the rows it takes at `columns`.
    public func resize(columns: Int, rows: Int) {
        lock.withLock {
            terminal.columns = max(1, columns)
            terminal.rows = max(1, rows)
            drawnRows = TerminalText.rows(drawn, width: terminal.columns)
        }
    }

    /// Clears the volatile text (the end of the transcript, or of its display).
    public func finish() { lock.withLock { clearVolatile() } }

    /// Clears what the last drawing left; lock held.
    private func clearVolatile() {
        guard drawnRows > 0 else { return }
        screen(erase())
        drawn = ""
        drawnRows = 0
    }

    /// Erases the rows the volatile text took, one by one, and leaves the cursor at the first
    /// column of the first; lock held. Rows, not the rest of the screen (`ESC [ J`): tmux moves a
    /// whole screen cleared from its top-left corner into its history (`scroll-on-clear`), which
    /// would keep a copy of every drawing when the transcript starts at the top of the screen.
    private func erase() -> String {
        guard drawnRows > 0 else { return "" }
        let up = drawnRows > 1 ? "\u{1B}[\(drawnRows - 1)A" : ""
        return "\r" + up + String(repeating: "\u{1B}[2K\u{1B}[1B", count: drawnRows - 1) + "\u{1B}[2K" + up
    }
}

extension LiveTranscriptRenderer {
    /// A renderer on this process's terminal (stderr), its size from `TIOCGWINSZ` and kept up to
    /// date on `SIGWINCH`; final text to stdout or, with `finalsToStderr`, to stderr. Volatile text
    /// is shown only when stderr is a terminal and `TERM` is not `dumb`; dim unless `NO_COLOR`.
    public static func onStandardError(finalsToStderr: Bool, environment: [String: String] = ProcessInfo.processInfo.environment) -> LiveTranscriptRenderer {
        let size = windowSize(of: 2)
        let term = environment["TERM"] ?? ""
        let cursor = isatty(2) == 1 && term != "dumb" && !term.isEmpty
        let styled = cursor && (environment["NO_COLOR"] ?? "").isEmpty
        let renderer = LiveTranscriptRenderer(
            terminal: Terminal(columns: size?.columns ?? 80, rows: size?.rows ?? 24, cursor: cursor, styled: styled),
            screen: { FileHandle.standardError.write(Data($0.utf8)) },
            finals: { (finalsToStderr ? FileHandle.standardError : FileHandle.standardOutput).write(Data($0.utf8)) })
        if cursor { renderer.followResizes() }
        return renderer
    }

    /// The size of the terminal on `fd`, if it is one.
    public static func windowSize(of fd: Int32) -> (columns: Int, rows: Int)? {
        var size = winsize()
        guard ioctl(fd, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return nil }
        return (Int(size.ws_col), Int(max(1, size.ws_row)))
    }

    /// Re-reads the size on every `SIGWINCH` for as long as the process runs.
    private func followResizes() {
        signal(SIGWINCH, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGWINCH, queue: .global())
        source.setEventHandler { [weak self] in
            if let size = Self.windowSize(of: 2) { self?.resize(columns: size.columns, rows: size.rows) }
        }
        source.resume()
        lock.withLock { resizes = source }
    }
}
