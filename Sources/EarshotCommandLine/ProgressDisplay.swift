import EarshotWire
import Foundation

/// Install progress on stderr: a redrawn bar on a terminal, one line per phase change otherwise.
public final class ProgressDisplay: @unchecked Sendable {
    private let lock = NSLock()
    private let isTTY = isatty(2) == 1
    private var lastPhase: [String: InstallPhase] = [:]
    private var drawn = false

    public init() {}

    /// Shows one progress event.
    public func show(_ event: InstallProgress) {
        lock.withLock {
            let name = "\(event.asset)@\(event.version)"
            let changed = lastPhase[name] != event.phase
            lastPhase[name] = event.phase
            if isTTY {
                let fraction = event.bytesTotal > 0 ? min(1, Double(event.bytesDone) / Double(event.bytesTotal)) : 0
                let width = 30
                let filled = Int(fraction * Double(width))
                let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
                let text = "\r\(name) \(event.phase.rawValue.padding(toLength: 11, withPad: " ", startingAt: 0)) [\(bar)] \(Self.bytes(event.bytesDone))/\(Self.bytes(event.bytesTotal))\u{1B}[K"
                FileHandle.standardError.write(Data(text.utf8))
                drawn = true
            } else if changed {
                FileHandle.standardError.write(Data("\(name): \(event.phase.rawValue) (\(Self.bytes(event.bytesDone))/\(Self.bytes(event.bytesTotal)))\n".utf8))
            }
        }
    }

    /// Ends the bar's line.
    public func finish() {
        lock.withLock {
            if drawn { FileHandle.standardError.write(Data("\n".utf8)) }
            drawn = false
        }
    }

    /// `1.5 MiB`-style sizes.
    public static func bytes(_ n: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(n)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(n) B" : String(format: "%.1f %@", value, units[unit])
    }
}
