import Foundation

/// Token times from the decoder's cross-attention, as OpenAI's `find_alignment` computes them:
/// the alignment heads' attention over the audio frames, standardised over the tokens, median
/// filtered (width 7) along time, averaged over heads, then a dynamic-time-warping path through
/// it; a token starts where the path first reaches its row.
enum TokenAlignment {
    /// Seconds per encoder frame.
    static let frameSeconds = 0.02
    static let medianWidth = 7

    /// Starts and durations of `textCount` text tokens. `attention` is (1, heads, rows, columns)
    /// probabilities; row `firstRow` is the query that predicts the first text token; only the
    /// first `frames` columns hold audio.
    static func times(attention: UnsafeBufferPointer<Float>, heads: Int, rows: Int, columns: Int, firstRow: Int,
                      textCount: Int, frames: Int) -> (starts: [Double], durations: [Double]) {
        let count = textCount + 1
        let width = min(frames, columns)
        guard textCount > 0, width > 0, firstRow + count <= rows else { return ([], []) }
        var matrix = [Double](repeating: 0, count: count * width)
        var filtered = [Double](repeating: 0, count: width)
        var column = [Double](repeating: 0, count: count)
        for head in 0..<heads {
            var standardised = [Double](repeating: 0, count: count * width)
            for frame in 0..<width {
                for row in 0..<count {
                    column[row] = Double(attention[(head * rows + firstRow + row) * columns + frame])
                }
                let mean = column.reduce(0, +) / Double(count)
                let deviation = (column.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / Double(count)).squareRoot()
                for row in 0..<count { standardised[row * width + frame] = deviation > 0 ? (column[row] - mean) / deviation : 0 }
            }
            for row in 0..<count {
                medianFilter(standardised, offset: row * width, count: width, into: &filtered)
                for frame in 0..<width { matrix[row * width + frame] += filtered[frame] / Double(heads) }
            }
        }
        let path = warp(matrix.map { -$0 }, rows: count, columns: width)
        var firstFrame = [Int](repeating: -1, count: count)
        for (row, frame) in path where firstFrame[row] < 0 { firstFrame[row] = frame }
        let jumps = firstFrame.map { Double(max(0, $0)) * frameSeconds }
        let starts = Array(jumps[0..<textCount])
        let durations = (0..<textCount).map { max(0, jumps[$0 + 1] - jumps[$0]) }
        return (starts, durations)
    }

    /// A median of `medianWidth` values centred on each value (reflected at the ends).
    static func medianFilter(_ values: [Double], offset: Int, count: Int, into out: inout [Double]) {
        let half = medianWidth / 2
        var window = [Double](repeating: 0, count: medianWidth)
        for index in 0..<count {
            for k in 0..<medianWidth {
                var at = index + k - half
                if at < 0 { at = -at }
                if at >= count { at = 2 * (count - 1) - at }
                window[k] = values[offset + min(max(at, 0), count - 1)]
            }
            window.sort()
            out[index] = window[half]
        }
    }

    /// The cheapest monotonic path from (0, 0) to the last cell through `cost`, as (row, column)
    /// pairs in order; a step moves down, right, or diagonally.
    static func warp(_ cost: [Double], rows: Int, columns: Int) -> [(Int, Int)] {
        let width = columns + 1
        var total = [Double](repeating: .infinity, count: (rows + 1) * width)
        var trace = [UInt8](repeating: 0, count: (rows + 1) * width)
        total[0] = 0
        for row in 1...rows {
            for column in 1...columns {
                let diagonal = total[(row - 1) * width + column - 1]
                let up = total[(row - 1) * width + column]
                let left = total[row * width + column - 1]
                let (best, move): (Double, UInt8) = diagonal <= up && diagonal <= left ? (diagonal, 0) : (up <= left ? (up, 1) : (left, 2))
                total[row * width + column] = cost[(row - 1) * columns + column - 1] + best
                trace[row * width + column] = move
            }
        }
        var path: [(Int, Int)] = []
        var row = rows, column = columns
        while row > 0 && column > 0 {
            path.append((row - 1, column - 1))
            switch trace[row * width + column] {
            case 0: row -= 1; column -= 1
            case 1: row -= 1
            default: column -= 1
            }
        }
        return path.reversed()
    }
}
