import Foundation

/// A helper process (a Python worker of a benchmark) that answers one JSON object per line it is
/// sent. Blocking: call it off the cooperative pool (`BlockingWork`).
public final class LineWorker: @unchecked Sendable {
    // @unchecked: used by one caller at a time, as a request/answer pipe.
    public let process = Process()
    private let input = Pipe(), output = Pipe()
    private var buffer = Data()
    private let name: String

    /// Starts `executable` with `arguments`; with `awaitsReady`, waits for its first line.
    public init(_ executable: String, _ arguments: [String], name: String, awaitsReady: Bool) throws {
        self.name = name
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        if awaitsReady { _ = try answer() }
    }

    public var pid: Int32 { process.processIdentifier }

    /// Sends `line` and returns the JSON object answered.
    public func ask(_ line: String) throws -> [String: Any] {
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
        return try answer()
    }

    /// Sends `request` as one JSON line and returns the JSON object answered.
    public func ask(json request: [String: Any]) throws -> [String: Any] {
        try ask(String(decoding: JSONSerialization.data(withJSONObject: request), as: UTF8.self))
    }

    private func answer() throws -> [String: Any] {
        while true {
            if let end = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = buffer[..<end]
                buffer.removeSubrange(...end)
                return try JSONSerialization.jsonObject(with: line) as? [String: Any] ?? [:]
            }
            let more = output.fileHandleForReading.availableData
            guard !more.isEmpty else {
                process.waitUntilExit()
                throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "the \(name) worker exited with status \(process.terminationStatus)"])
            }
            buffer += more
        }
    }

    /// Closes its input and waits for it to exit.
    public func stop() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}
