import EarshotSystem
import Foundation

/// A seeded generator of hostile traffic for a running daemon: well-formed events with hostile
/// field values (Wyoming audio at absurd rates, widths and channel counts; analyzer sessions with
/// bogus modules, options and audio; asset requests with garbage), frames mutated byte by byte,
/// truncated or oversized headers — each connection's bytes written in random splits. Same seed,
/// same traffic. Used by the fuzz test (bounded in time) and `Benchmarks/fuzz.sh` (10⁶ frames).
public struct ProtocolFuzzer {
    /// SplitMix64: small, fast and reproducible.
    public typealias Generator = SplitMix64

    /// What a run did.
    public struct Report: Sendable, CustomStringConvertible {
        public var connections = 0
        public var frames = 0
        public var bytesSent = 0
        /// Connections the daemon closed on us (a malformed frame closes its connection: expected).
        public var closedByDaemon = 0
        public init() {}
        /// Adds another run's counts.
        public mutating func add(_ other: Report) {
            connections += other.connections
            frames += other.frames
            bytesSent += other.bytesSent
            closedByDaemon += other.closedByDaemon
        }
        public var description: String {
            "\(frames) frames (\(bytesSent / 1024) KiB) over \(connections) connections, \(closedByDaemon) closed by the daemon"
        }
    }

    public var generator: Generator
    public init(seed: UInt64) { generator = Generator(seed: seed) }

    // MARK: Values

    private mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &generator) }
    private mutating func chance(_ percent: Int) -> Bool { int(0...99) < percent }

    /// A number a careless parser or allocator trips over.
    private mutating func hostileNumber() -> Any {
        let choices: [Any] = [0, 1, -1, 2, 3, 7, 8000, 16000, 44100, 48000, 384_001, 1 << 31, -(1 << 31), Int.max, Int.min,
                              1e308, -0.0, 0.5, "16000", NSNull(), [1, 2], ["rate": 1]]
        return chance(70) ? choices[int(0...(choices.count - 1))] : int(-100_000...1_000_000)
    }

    private mutating func hostileString() -> Any {
        let choices: [Any] = ["", "en-US", "und", "xx", "../../etc/passwd", String(repeating: "a", count: int(0...5000)),
                              "\u{0}", "de", "transcriber", "dictation", "detector", 42, NSNull(), ["nested": ["deep": true]]]
        return choices[int(0...(choices.count - 1))]
    }

    private mutating func payload() -> [UInt8] {
        let count = chance(10) ? int(0...32768) : int(0...2048)
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    private mutating func module() -> [String: Any] {
        var module: [String: Any] = ["kind": chance(80) ? ["transcriber", "dictation", "detector"][int(0...2)] : hostileString()]
        if chance(80) { module["locale"] = hostileString() }
        if chance(30) { module["preset"] = ["progressiveTranscription", "transcription", "phrase", hostileString()][int(0...3)] }
        if chance(30) { module["reporting_options"] = [["volatileResults"], ["alternativeTranscriptions"], hostileString()][int(0...2)] }
        if chance(20) { module["transcription_options"] = [["translate"], hostileString()][int(0...1)] }
        if chance(20) { module["sensitivity"] = hostileString() }
        if chance(10) { module["language_model"] = ["model": hostileString(), "weight": hostileNumber()] }
        return module
    }

    // MARK: Frames

    /// One well-formed event with hostile data, and its payload.
    private mutating func event(sessions: [String]) -> (type: String, data: [String: Any], payload: [UInt8]) {
        let session = sessions.isEmpty || chance(20) ? "s\(int(0...50))" : sessions[int(0...(sessions.count - 1))]
        switch int(0...16) {
        case 0: return ("describe", [:], [])
        case 1: return ("transcribe", ["language": hostileString(), "name": hostileString()], [])
        case 2, 3: return ("audio-start", ["rate": hostileNumber(), "width": hostileNumber(), "channels": hostileNumber()], [])
        case 4, 5, 6: return ("audio-chunk", ["rate": hostileNumber(), "width": hostileNumber(), "channels": hostileNumber()], payload())
        case 7: return ("audio-stop", [:], [])
        case 8: return ("earshot.hello", ["app_id": hostileString(), "protocol_version": hostileNumber()], [])
        case 9: return ("earshot.analyzer.open", ["id": "o\(int(0...9))", "modules": (0..<int(0...3)).map { _ in module() },
                                                 "options": ["ignores_resource_limits": chance(50), "model_retention": hostileString()]], [])
        case 10, 11: return ("earshot.analyzer.audio", ["session": session, "rate": hostileNumber(), "width": hostileNumber(),
                                                        "channels": hostileNumber()], payload())
        case 12: return ("earshot.analyzer.control", ["id": "c", "session": session, "action": ["finalize", "finish", "cancel-before", "set-modules", hostileString()][int(0...4)],
                                                     "mode": hostileString(), "time": ["value": hostileNumber(), "timescale": hostileNumber()]], [])
        case 13: return (["earshot.reserve", "earshot.release", "earshot.install", "earshot.module-status", "earshot.locales"][int(0...4)],
                         ["id": "a", "locale": hostileString(), "modules": [module()], "kind": hostileString()], [])
        case 14: return (["earshot.stats", "earshot.status", "earshot.end-retention", "earshot.reservations", "ping"][int(0...4)], ["id": "x"], [])
        case 15: return (["earshot.language-model.prepare", "earshot.language-model.list"][int(0...1)],
                         ["id": "m", "ignores_cache": chance(50), "client_identifier": hostileString(), "all": chance(50)], payload())
        default: return (String(describing: hostileString()), ["id": hostileNumber()], payload())
        }
    }

    /// The bytes of one frame in the Wyoming framing: a JSON header line, the data (inline or as
    /// `data_length` bytes), the payload.
    private mutating func encode(_ type: String, _ data: [String: Any], _ payload: [UInt8]) -> [UInt8] {
        let dataBytes = (try? JSONSerialization.data(withJSONObject: data, options: [.fragmentsAllowed])) ?? Data("{}".utf8)
        var header: [String: Any] = ["type": type, "version": "1.7.0"]
        if chance(50) { header["data"] = data } else if !data.isEmpty { header["data_length"] = dataBytes.count }
        if !payload.isEmpty || chance(5) { header["payload_length"] = chance(95) ? payload.count : hostileNumber() }
        var bytes = Array((try? JSONSerialization.data(withJSONObject: header)) ?? Data())
        bytes.append(UInt8(ascii: "\n"))
        if header["data_length"] != nil { bytes += Array(dataBytes) }
        return bytes + payload
    }

    /// A hostile frame: mostly a well-formed event, sometimes mutated, truncated, or garbage.
    mutating func frame(sessions: [String]) -> [UInt8] {
        let (type, data, payload) = event(sessions: sessions)
        var bytes = encode(type, data, payload)
        switch int(0...39) {
        case 0: // flip bytes
            for _ in 0..<int(1...8) where !bytes.isEmpty { bytes[int(0...(bytes.count - 1))] = UInt8.random(in: 0...255, using: &generator) }
        case 1: // truncate
            bytes = Array(bytes.prefix(int(0...bytes.count)))
        case 2: // a header line that never ends, or one far too long
            bytes = Array(repeating: UInt8(ascii: "{"), count: int(1...70_000))
        case 3: // raw garbage
            bytes = payload.isEmpty ? [0xFF, 0x0A] : payload
        default:
            break
        }
        return bytes
    }

    // MARK: Running

    /// Sends `frames` hostile frames to the daemon at `socket` over connections of 1–64 frames,
    /// each written in random splits while replies are read and discarded. Stops early at
    /// `deadline`. Throws only when it cannot connect at all.
    public mutating func run(socket: String, frames: Int, deadline: ContinuousClock.Instant = .now + .seconds(86400)) throws -> Report {
        var report = Report()
        while report.frames < frames, ContinuousClock.now < deadline {
            let fd = try UnixSocket.connect(path: socket)
            defer { close(fd) }
            report.connections += 1
            var sessions = ["s1", "s2"]
            let count = min(int(1...64), frames - report.frames)
            var open = true
            for _ in 0..<count where open {
                var bytes = frame(sessions: sessions)
                if chance(10) { sessions.append("s\(int(1...20))") }
                report.frames += 1
                while !bytes.isEmpty, open {
                    let piece = min(bytes.count, chance(30) ? int(1...16) : int(1...65536))
                    let sent = Self.write(fd, Array(bytes.prefix(piece)))
                    if sent < 0 { open = false; break }
                    report.bytesSent += sent
                    bytes.removeFirst(sent)
                    Self.drain(fd)
                }
            }
            if !open { report.closedByDaemon += 1 }
            Self.drain(fd)
        }
        return report
    }

    /// Writes what the socket takes within 2 s; the count, or -1 when the daemon closed it.
    private static func write(_ fd: Int32, _ bytes: [UInt8]) -> Int {
        var pfd = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        guard poll(&pfd, 1, 2000) > 0, pfd.revents & Int16(POLLERR | POLLHUP) == 0 else { return -1 }
        let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if sent < 0 { return errno == EAGAIN || errno == EINTR ? 0 : -1 }
        return sent
    }

    /// Reads and discards whatever the daemon has sent.
    private static func drain(_ fd: Int32) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while buffer.withUnsafeMutableBytes({ Glibc.recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }) > 0 {}
    }

    /// Resident memory of process `pid` in bytes (`VmRSS`), or nil when it is gone.
    public static func residentBytes(pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kib = Int(line.split(separator: " ").dropFirst().first ?? "") else { return nil }
        return kib * 1024
    }
}
