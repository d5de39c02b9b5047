@testable import EarshotCommandLine
import Foundation

/// A terminal of a given size that understands what the live transcript writes — printable text
/// (wrapping at the last column, wide characters moved to the next row when they do not fit),
/// `\r`, `\n` (as CR LF, the tty's `onlcr`), cursor up and down (`ESC [ n A`, `ESC [ n B`), erase
/// to the end of the screen (`ESC [ J`), of the row (`ESC [ K`) or the whole row (`ESC [ 2 K`),
/// dim on and off (`ESC [ 2 m`, `ESC [ 0 m`) — and
/// rewraps its lines when resized, as tmux and VTE do. Rows that scroll off the top go to the
/// scrollback.
final class FakeTerminal: @unchecked Sendable {
    struct Cell: Equatable {
        var text = " "
        var dim = false
    }
    struct Row {
        var cells: [Cell]
        /// The row's line goes on in the next row (the terminal wrapped it).
        var wrapped = false
        init(width: Int) { cells = Array(repeating: Cell(), count: width) }
    }

    private let lock = NSLock()
    private(set) var width: Int
    private(set) var height: Int
    private var scrollback: [Row] = []
    private var screen: [Row]
    private var row = 0
    /// `width` means the cursor waits at the end of a full row (pending wrap).
    private var column = 0
    private var dim = false
    /// Every byte written, for checks on what was sent.
    private(set) var written = ""

    init(width: Int, height: Int) {
        self.width = width
        self.height = height
        screen = Array(repeating: Row(width: width), count: height)
    }

    func write(_ text: String) {
        lock.withLock {
            written += text
            var scalars = Array(text.unicodeScalars)[...]
            while let scalar = scalars.popFirst() {
                switch scalar {
                case "\u{1B}":
                    guard scalars.first == "[" else { continue }
                    scalars.removeFirst()
                    var parameter = ""
                    while let next = scalars.first, next.properties.numericType != nil || next == ";" {
                        parameter.unicodeScalars.append(next)
                        scalars.removeFirst()
                    }
                    guard let command = scalars.popFirst() else { return }
                    control(command, Int(parameter))
                case "\r": column = 0
                case "\n":
                    lineFeed()
                    column = 0
                default: put(scalar)
                }
            }
        }
    }

    private func control(_ command: Unicode.Scalar, _ parameter: Int?) {
        switch command {
        case "A":
            row = max(0, row - (parameter ?? 1))
            column = min(column, width - 1)
        case "J":
            clearRow(from: min(column, width))
            for below in (row + 1)..<height { screen[below] = Row(width: width) }
        case "B": row = min(height - 1, row + (parameter ?? 1))
        case "K":
            if parameter == 2 {
                clearRow(from: 0)
            } else {
                clearRow(from: min(column, width))
            }
        case "m": dim = parameter == 2
        default: break
        }
    }

    private func clearRow(from start: Int) {
        for index in start..<width { screen[row].cells[index] = Cell() }
        screen[row].wrapped = false
    }

    private func lineFeed() {
        if row == height - 1 {
            scrollback.append(screen.removeFirst())
            screen.append(Row(width: width))
        } else {
            row += 1
        }
    }

    private func put(_ scalar: Unicode.Scalar) {
        let size = TerminalText.columns(scalar)
        if size == 0 {
            // Combining: joins the character before it.
            let previous = max(0, min(column, width) - 1)
            screen[row].cells[previous].text.unicodeScalars.append(scalar)
            return
        }
        if column + size > width {
            // A wide character that does not fit leaves the row's last column empty.
            for skipped in min(column, width)..<width { screen[row].cells[skipped] = Cell(text: "") }
            screen[row].wrapped = true
            lineFeed()
            column = 0
        }
        screen[row].cells[column] = Cell(text: String(Character(scalar)), dim: dim)
        if size == 2 { screen[row].cells[column + 1] = Cell(text: "", dim: dim) }
        column += size
    }

    /// The terminal is resized: its lines are rewrapped at `width`, the cursor stays where it was
    /// in its line, and rows that no longer fit above it go to the scrollback.
    func resize(width newWidth: Int, height newHeight: Int) {
        lock.withLock {
            // Logical lines up to the cursor's row (rows below it are empty).
            var lines: [[Cell]] = []
            var current: [Cell] = []
            var cursorLine = 0, cursorOffset = 0
            let all = scrollback + screen[...row]
            for (index, line) in all.enumerated() {
                let isCursorRow = index == all.count - 1
                if isCursorRow { cursorOffset = current.count + min(column, width) }
                var cells = line.cells
                if !line.wrapped { while let last = cells.last, last == Cell() { cells.removeLast() } }
                current += cells
                if !line.wrapped || isCursorRow {
                    if isCursorRow { cursorLine = lines.count }
                    lines.append(current)
                    current = []
                }
            }
            var rows: [Row] = []
            var cursorRow = 0, cursorColumn = 0
            for (index, line) in lines.enumerated() {
                var offset = 0
                var placed = Row(width: newWidth)
                var column = 0
                for cell in line {
                    let size = cell.text.isEmpty ? 0 : max(1, TerminalText.columns(cell.text))
                    if cell.text.isEmpty { offset += 1; continue }
                    if column + size > newWidth {
                        placed.wrapped = true
                        rows.append(placed)
                        placed = Row(width: newWidth)
                        column = 0
                    }
                    if index == cursorLine, offset == cursorOffset { (cursorRow, cursorColumn) = (rows.count, column) }
                    placed.cells[column] = cell
                    if size == 2 { placed.cells[column + 1] = Cell(text: "", dim: cell.dim) }
                    column += size
                    offset += 1
                }
                if index == cursorLine, offset <= cursorOffset { (cursorRow, cursorColumn) = (rows.count, min(column + cursorOffset - offset, newWidth)) }
                rows.append(placed)
            }
            width = newWidth
            height = newHeight
            let top = max(0, cursorRow - newHeight + 1)
            scrollback = Array(rows[..<top])
            screen = Array(rows[top...])
            while screen.count < newHeight { screen.append(Row(width: newWidth)) }
            row = cursorRow - top
            column = cursorColumn
        }
    }

    /// The lines on the terminal (scrollback included), as a reader sees them: wrapped rows joined,
    /// trailing blanks dropped, empty lines at the end left out.
    var lines: [String] {
        lock.withLock {
            var lines: [String] = []
            var current = ""
            for line in scrollback + screen {
                current += line.cells.map(\.text).joined()
                if !line.wrapped {
                    lines.append(String(current.reversed().drop { $0 == " " }.reversed()))
                    current = ""
                }
            }
            while lines.last?.isEmpty == true { lines.removeLast() }
            return lines
        }
    }

    /// The dim text on the terminal, in order.
    var dimText: String {
        lock.withLock { (scrollback + screen).flatMap(\.cells).filter(\.dim).map(\.text).joined() }
    }

    /// How many times `phrase` appears on the terminal (spaces folded, across wrapped rows).
    func count(_ phrase: String) -> Int {
        let text = lines.joined(separator: " ")
        return text.components(separatedBy: phrase).count - 1
    }
}
