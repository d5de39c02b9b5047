@testable import EarshotCommandLine
import Foundation
import Testing

/// Issue 28: the live transcript of `earshot transcribe --mic`/`--live` on a terminal. Before,
/// volatile text was redrawn with `\r ESC[K`, which clears one row: once the paragraph wrapped,
/// every update left its upper rows behind, and an 80-column terminal showed the first sentence
/// ten times. These drive the renderer against a fake terminal of a given size.
struct LiveTranscriptTests {
    static let sentence = "And Mr. John Dashwood had then leisure to consider how much there might be prudently in his power to do for them."
    static let second = "He was not an ill-disposed young man, unless to be rather cold-hearted and rather selfish, is to be ill-disposed."

    /// A renderer on `terminal`, final text to the same terminal (stdout and stderr are one tty).
    static func renderer(_ terminal: FakeTerminal, cursor: Bool = true, styled: Bool = true) -> LiveTranscriptRenderer {
        LiveTranscriptRenderer(terminal: .init(columns: terminal.width, rows: terminal.height, cursor: cursor, styled: styled),
                               screen: { terminal.write($0) }, finals: { terminal.write($0) })
    }

    /// Volatile results as a re-decoding recognizer gives them: the open speech so far, a word more
    /// each time.
    static func growing(_ text: String) -> [String] {
        let words = text.split(separator: " ")
        return (1...words.count).map { words.prefix($0).joined(separator: " ") }
    }

    @Test func aVolatileParagraphThatWrapsIsRedrawnInPlaceNotRepeated() {
        // The old redraw — return, erase one row — on the same terminal repeats the paragraph.
        let old = FakeTerminal(width: 80, height: 24)
        for text in Self.growing(Self.sentence) { old.write("\r\u{1B}[K\u{1B}[2m\(text)\u{1B}[0m") }
        #expect(old.count("John Dashwood") > 5, "\(old.lines)")

        let terminal = FakeTerminal(width: 80, height: 24)
        let live = Self.renderer(terminal)
        for text in Self.growing(Self.sentence + " " + Self.second) { live.show(text) }
        #expect(terminal.count("John Dashwood") == 1, "\(terminal.lines)")
        #expect(terminal.lines.count == 1, "one paragraph (wrapped over three rows): \(terminal.lines)")
        #expect(terminal.dimText.hasPrefix("And Mr. John"), "volatile text is dim")
        live.commit(Self.sentence)
        for text in Self.growing(Self.second) { live.show(text) }
        live.commit(Self.second)
        live.finish()
        #expect(terminal.lines == [Self.sentence, Self.second], "each final once, nothing volatile left: \(terminal.lines)")
        #expect(terminal.dimText.trimmingCharacters(in: .whitespaces).isEmpty)
        // Found in tmux: the screen cleared from its top-left corner went to the history, a copy
        // each time. Rows are erased one by one instead; nothing clears the screen.
        #expect(!terminal.written.contains("\u{1B}[J"))
    }

    @Test func shrinkingVolatileTextLeavesNothingBehind() {
        let terminal = FakeTerminal(width: 40, height: 10)
        let live = Self.renderer(terminal)
        live.commit("Before.")
        live.show(Self.sentence)
        live.show("And Mr. John")
        #expect(terminal.lines == ["Before.", "And Mr. John"], "\(terminal.lines)")
        live.show("")
        #expect(terminal.lines == ["Before."])
    }

    @Test(arguments: [(80, 30), (30, 80), (80, 57)])
    func aResizedTerminalIsStillRedrawnWithoutCopies(from: Int, to: Int) {
        let terminal = FakeTerminal(width: from, height: 24)
        let live = Self.renderer(terminal)
        live.commit("Final text stays.")
        live.show(Self.sentence)
        terminal.resize(width: to, height: 24)
        live.resize(columns: to, rows: 24)
        live.show(Self.sentence + " " + Self.second)
        #expect(terminal.count("John Dashwood") == 1 && terminal.count("Final text stays.") == 1, "\(terminal.lines)")
        live.commit(Self.sentence)
        #expect(terminal.lines == ["Final text stays.", Self.sentence], "\(terminal.lines)")
    }

    @Test func wideAndCombiningCharactersAreCountedInColumns() {
        #expect(TerminalText.columns("日本語") == 6)
        #expect(TerminalText.columns("e\u{301}te\u{301}") == 3, "combining accents take no column")
        // Four wide characters fill 8 of 9 columns; the fifth goes to the next row.
        #expect(TerminalText.rows("日本語日本", width: 9) == 2)
        #expect(TerminalText.rows(String(repeating: "e\u{301}", count: 10), width: 10) == 1)
        #expect(TerminalText.rows("", width: 10) == 0 && TerminalText.rows("abc", width: 3) == 1 && TerminalText.rows("abcd", width: 3) == 2)
        let terminal = FakeTerminal(width: 9, height: 10)
        let live = Self.renderer(terminal)
        let words = ["日本語の", "日本語のテキスト", "日本語のテキストを表示します", "Cafe\u{301} 日本語のテキストを表示します"]
        for text in words { live.show(text) }
        #expect(terminal.lines.joined() == words.last!, "\(terminal.lines)")
        live.commit("終わり")
        #expect(terminal.lines == ["終わり"], "\(terminal.lines)")
    }

    @Test func aParagraphTallerThanTheScreenShowsItsEndAndScrollsNoCopies() {
        let terminal = FakeTerminal(width: 20, height: 5)
        let live = Self.renderer(terminal)
        let long = String(repeating: Self.sentence + " ", count: 3).trimmingCharacters(in: .whitespaces)
        for text in Self.growing(long) { live.show(text) }
        // At most height − 1 rows, starting with "…", so every row drawn can be reached again.
        #expect(terminal.lines.count == 1 && terminal.lines[0].hasPrefix("…") && terminal.lines[0].hasSuffix("for them."), "\(terminal.lines)")
        #expect(TerminalText.rows(terminal.lines[0], width: 20) <= 4)
        live.commit(long)
        #expect(terminal.lines == [long], "the final text once, whole, scrolled: \(terminal.lines)")
    }

    @Test func withoutCursorControlOnlyFinalTextIsWrittenAndWithoutColourNothingIsDim() {
        let dumb = FakeTerminal(width: 80, height: 24)
        let finalsOnly = Self.renderer(dumb, cursor: false, styled: false)
        for text in Self.growing(Self.sentence) { finalsOnly.show(text) }
        finalsOnly.commit(Self.sentence)
        finalsOnly.finish()
        #expect(dumb.written == Self.sentence + "\n", "no escape sequence, no volatile text")

        let plain = FakeTerminal(width: 80, height: 24)
        let noColor = Self.renderer(plain, styled: false)
        noColor.show("And Mr. John")
        #expect(!plain.written.contains("\u{1B}[2m") && plain.lines == ["And Mr. John"] && plain.dimText.isEmpty)
    }

    @Test func finalTextToAPipeClearsTheVolatileTextFromTheTerminal() {
        final class Pipe: @unchecked Sendable { var text = "" }
        let terminal = FakeTerminal(width: 30, height: 10)
        let pipe = Pipe()
        let live = LiveTranscriptRenderer(terminal: .init(columns: 30, rows: 10), screen: { terminal.write($0) }, finals: { pipe.text += $0 })
        for text in Self.growing(Self.sentence) { live.show(text) }
        live.commit(Self.sentence)
        #expect(terminal.lines.isEmpty && pipe.text == Self.sentence + "\n")
    }

    @Test func theEnvironmentDecidesCursorAndColour() {
        // Not a terminal here (tests' stderr is a file or pipe): finals only, whatever TERM says.
        let renderer = LiveTranscriptRenderer.onStandardError(finalsToStderr: true, environment: ["TERM": "xterm-256color"])
        renderer.show("nothing shown")
        renderer.finish()
    }
}
