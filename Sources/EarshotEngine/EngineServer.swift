import EarshotSherpaOnnx
import EarshotEngineLink
import EarshotSystem
import EarshotWhisper
import EarshotWire
import Foundation

/// The engine process's side of the link to earshotd: reads requests (``EngineWhisperLoad``,
/// ``EngineVADLoad``, ``EngineWhisperDecode``, ``EngineWhisperPreviousText``, ``EngineVADStep``,
/// ``EngineRelease``) from a socket and answers each with its reply. Loads and detector steps run
/// on a serial queue per object, so one object's requests keep their order and other objects
/// never wait behind them; each Whisper decode has a thread of its own, so decodes on one model
/// overlap as they do in process (earshotd bounds how many run), and one whose earlier text
/// follows waits on its thread for it.
public final class EngineServer: @unchecked Sendable {
    // @unchecked: `objects`, `queues` and `awaitedTexts` are guarded by `lock`.
    private let link: BlockingFrameLink
    private let lock = NSLock()
    private var objects: [String: AnyObject] = [:]
    private var queues: [String: DispatchQueue] = [:]
    /// Decodes sent with ``EngineWhisperDecode/previousTextFollows``, by request id, until they end.
    private var awaitedTexts: [String: AwaitedText] = [:]

    /// The engine process's mmap threshold (`MemoryReclaim.keepLargeBlocksReturnable(above:)`):
    /// 4 MiB. On every step sherpa-onnx's detector copies the speech segment so far into a new
    /// vector (≤ ``EngineVADLoad/maxBufferSeconds`` × 64 KB/s, 2.4 MiB); under earshotd's 128 KiB
    /// threshold each copy was a fresh mapping, faulted in page by page and unmapped again, so a
    /// step cost more the longer the speech went on (a 6 s utterance's steps: 52 ms, 21–31 ms with
    /// the copies on the heap). ONNX Runtime's model weights and arena chunks are larger and stay
    /// mapped, so unloading one of several models still gives its memory back.
    public static let mmapThreshold = 4 << 20

    public init(fd: Int32) {
        link = BlockingFrameLink(fd: fd, limits: EngineLink.limits)
    }

    /// Serves until earshotd closes the link; returns why it ended (nil: a clean close).
    public func run() -> String? {
        do {
            while let frame = try link.read() { handle(frame) }
            return nil
        } catch {
            return "\(error)"
        }
    }

    private func handle(_ frame: Frame) {
        let id = frame.requestID ?? ""
        do {
            switch frame.type {
            case EngineWhisperLoad.eventType:
                let request = try frame.decode(EngineWhisperLoad.self)
                load(request.object, id: id, what: "the Whisper model in \(request.encoder)") { try WhisperDecoder(request) }
            case EngineVADLoad.eventType:
                let request = try frame.decode(EngineVADLoad.self)
                load(request.object, id: id, what: "silero VAD from \(request.model)") {
                    guard let detector = Detector(request, mmapThreshold: Self.mmapThreshold) else {
                        throw EngineRequestError(message: "sherpa-onnx refused the configuration")
                    }
                    return detector
                }
            case EngineWhisperDecode.eventType:
                let request = try frame.decode(EngineWhisperDecode.self)
                let decoder: WhisperDecoder = try object(request.object)
                let samples = EngineSamples.samples(frame.payload)
                // Registered before the next frame is read: the text that follows finds it.
                let awaited = request.previousTextFollows == true ? lock.withLock {
                    let box = AwaitedText()
                    awaitedTexts[id] = box
                    return box
                } : nil
                let thread = Thread { [self] in
                    do {
                        let result = if let awaited {
                            try decoder.decode(samples, request) { awaited.text() }
                        } else {
                            try decoder.decode(samples, request)
                        }
                        reply { try Frame(result) }
                    } catch {
                        reply { try Frame(EngineFailure(id: id, kind: .invalidRequest, message: "\(error)")) }
                    }
                    if awaited != nil { lock.withLock { awaitedTexts[id] = nil } }
                }
                thread.name = "earshot.engine-decode"
                thread.start()
            case EngineWhisperPreviousText.eventType:
                let request = try frame.decode(EngineWhisperPreviousText.self)
                guard let awaited = lock.withLock({ awaitedTexts[request.decode] }) else {
                    throw EngineRequestError(message: "no decode '\(request.decode)' waits for its earlier text")
                }
                awaited.give(request.text)
                reply { try Frame(EngineWhisperPreviousTextTaken(id: id)) }
            case EngineVADStep.eventType:
                let request = try frame.decode(EngineVADStep.self)
                let detector: Detector = try object(request.object)
                let samples = EngineSamples.samples(frame.payload)
                queue(for: request.object).async { [self] in
                    reply { try Frame(detector.run(request, samples: samples, id: id)) }
                }
            case EngineRelease.eventType:
                let request = try frame.decode(EngineRelease.self)
                // After the object's queued steps; the last reference goes on its queue.
                queue(for: request.object).async { [self] in
                    lock.withLock {
                        objects[request.object] = nil
                        queues[request.object] = nil
                    }
                    reply { try Frame(EngineReleased(id: id)) }
                }
            default:
                throw EngineRequestError(message: "unknown request '\(frame.type)'")
            }
        } catch {
            reply { try Frame(EngineFailure(id: id, kind: .invalidRequest, message: "\(error)")) }
        }
    }

    /// Loads an object on its own queue and answers with the memory it took.
    private func load(_ name: String, id: String, what: String, _ make: @escaping @Sendable () throws -> AnyObject) {
        queue(for: name).async { [self] in
            let before = ProcessFacts.residentBytes()
            let made: AnyObject
            do {
                made = try make()
            } catch {
                reply { try Frame(EngineFailure(id: id, kind: .loadFailed, message: "could not load \(what): \(error)")) }
                return
            }
            lock.withLock { objects[name] = made }
            let loaded = EngineLoaded(id: id, memoryBytes: max(0, ProcessFacts.residentBytes() - before))
            reply { try Frame(loaded) }
        }
    }

    private func object<T>(_ name: String) throws -> T {
        guard let found = lock.withLock({ objects[name] }) as? T else {
            throw EngineRequestError(message: "no loaded \(T.self) '\(name)'")
        }
        return found
    }

    private func queue(for name: String) -> DispatchQueue {
        lock.withLock {
            if let queue = queues[name] { return queue }
            let queue = DispatchQueue(label: "earshot.engine.\(name)")
            queues[name] = queue
            return queue
        }
    }

    /// Sends a reply; if the link is gone, earshotd is too, and the read loop ends.
    private func reply(_ make: () throws -> Frame) {
        try? link.write(make())
    }

    /// The earlier text one decode waits for (``EngineWhisperPreviousText``).
    private final class AwaitedText: @unchecked Sendable {
        // @unchecked: `given` is guarded by `condition`.
        private let condition = NSCondition()
        private var given: String??

        func give(_ text: String?) {
            condition.withLock {
                if given == nil { given = .some(text) }
                condition.broadcast()
            }
        }

        /// Blocks until the text is given.
        func text() -> String? {
            condition.withLock {
                while given == nil { condition.wait() }
                return given!
            }
        }
    }

    private struct EngineRequestError: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }
}
