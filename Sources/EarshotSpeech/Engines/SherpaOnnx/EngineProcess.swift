import EarshotSystem
import EarshotEngineLink
import EarshotWire
import Foundation

/// The process the ONNX Runtime engines (Earshot's Whisper decoder, sherpa-onnx's silero detector) run in: `earshot-engine`,
/// started when the first of them is loaded and ended when the last one goes. ONNX Runtime keeps
/// about 8 MiB of registries and globals for the life of a process that ever ran it, and a
/// model's working memory is ~100 MiB; in a process of their own, all of it leaves with the last
/// model, and an engine that crashes takes only its objects with it (their calls fail with
/// ``SherpaOnnxError/engineUnavailable(_:)``; the next load starts a new process).
public final class EngineProcess: @unchecked Sendable {
    // @unchecked: `worker`, `live` and `nextObject` are guarded by `lock`.

    /// The process every engine in earshotd (and in tests) uses.
    public static let shared = EngineProcess(executable: defaultExecutable())

    /// `EARSHOT_ENGINE` if set, else `earshot-engine` beside this executable, else
    /// `../libexec/earshot/earshot-engine` from its directory (the installed layout).
    public static func defaultExecutable(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let path = environment["EARSHOT_ENGINE"], !path.isEmpty { return path }
        let directory = ProcessFacts.executableDirectory
        let beside = directory + "/earshot-engine"
        if FileManager.default.isExecutableFile(atPath: beside) { return beside }
        return ((directory as NSString).deletingLastPathComponent as NSString).appendingPathComponent("libexec/earshot/earshot-engine")
    }

    /// What happened to the engine process, for the daemon's log.
    public enum Event: Sendable {
        case started(pid: Int32)
        /// `unexpected`: it was not asked to end (it crashed, was killed, or broke the protocol).
        case ended(pid: Int32, reason: String, unexpected: Bool)
    }

    public let executable: String
    private let lock = NSLock()
    private var observer: (@Sendable (Event) -> Void)?
    private var worker: WorkerProcess?
    /// Live objects per engine process (a crashed one's may outlive it).
    private var live: [ObjectIdentifier: Int] = [:]
    private var nextObject = 0

    public init(executable: String) {
        self.executable = executable
    }

    /// Sets who hears of the engine process starting and ending (one observer: the daemon's log).
    public func observe(_ observer: @escaping @Sendable (Event) -> Void) {
        lock.withLock { self.observer = observer }
    }

    /// The running engine process's id, nil when none runs (no engine is loaded).
    public var processID: Int32? {
        lock.withLock { worker.flatMap { $0.isRunning ? $0.pid : nil } }
    }

    /// The engine libraries' versions, from `earshot-engine --version` (blocking; for
    /// `earshotd --version`).
    public func libraryVersions() -> [LinkedLibrary] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["--version"]
        let output = Pipe()
        process.standardOutput = output
        do {
            try process.run()
            let data = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return try JSONDecoder().decode([LinkedLibrary].self, from: data)
        } catch {
            return [LinkedLibrary(name: "sherpa-onnx", version: "unavailable: \(executable): \(error)")]
        }
    }

    /// A new object in the engine process, loaded by `request` (an ``EngineWhisperLoad`` or
    /// ``EngineVADLoad`` for the object's name); starts the process if none runs. Blocking.
    func load(_ request: (String) throws(SherpaOnnxError) -> Frame) throws(SherpaOnnxError) -> (EngineObject, EngineLoaded) {
        lock.lock()
        let running: WorkerProcess
        if let worker, worker.isRunning {
            running = worker
        } else {
            do {
                running = try WorkerProcess(executable: executable, limits: EngineLink.limits) { [weak self] pid, why, asked in
                    self?.lock.withLock { self?.observer }?(.ended(pid: pid, reason: "\(why)", unexpected: !asked))
                }
            } catch {
                lock.unlock()
                throw .engineUnavailable("\(error)")
            }
            worker = running
            observer?(.started(pid: running.pid))
        }
        live[ObjectIdentifier(running), default: 0] += 1
        nextObject += 1
        let name = String(nextObject)
        lock.unlock()
        let object = EngineObject(name: name, worker: running, owner: self)
        let loaded = try object.call(request(name), replying: EngineLoaded.self).0
        return (object, loaded)
    }

    /// An object is gone: free it in the engine process, and end the process with the last one.
    fileprivate func released(_ object: EngineObject) {
        let last = lock.withLock { () -> WorkerProcess? in
            let key = ObjectIdentifier(object.worker)
            live[key, default: 1] -= 1
            guard live[key] == 0 else { return nil }
            live[key] = nil
            if worker === object.worker { worker = nil }
            return object.worker
        }
        if let last {
            // Its objects are all gone: ending the link frees everything at once.
            last.close()
        } else if object.worker.isRunning {
            let worker = object.worker
            let request = EngineRelease(id: "", object: object.name)
            // Unanswered releases would hold a thread each only while the engine works.
            Thread.detachNewThread { _ = try? worker.call(Frame(request)) }
        }
    }
}

/// One loaded model or detector in the engine process; freed there when this goes.
final class EngineObject: Sendable {
    let name: String
    let worker: WorkerProcess
    private let owner: EngineProcess

    fileprivate init(name: String, worker: WorkerProcess, owner: EngineProcess) {
        self.name = name
        self.worker = worker
        self.owner = owner
    }

    deinit { owner.released(self) }

    /// Whether the engine process holding it still runs.
    var isUsable: Bool { worker.isRunning }

    /// Sends `request` and decodes its reply as `R` (an ``EngineFailure`` becomes the error it
    /// reports); `meanwhile`, given the request's id, runs before the reply is waited for (it
    /// sends what follows the request; its error counts only when the reply reports none).
    /// Blocking.
    func call<R: WireEvent>(_ request: Frame, replying _: R.Type,
                            meanwhile: ((String) throws(SherpaOnnxError) -> Void)? = nil) throws(SherpaOnnxError) -> (R, [UInt8]) {
        let reply: Frame
        var failed: SherpaOnnxError?
        do {
            let pending = try worker.begin(request)
            // The reply is waited for whatever `meanwhile` does: it never goes unread.
            do { try meanwhile?(pending.id) } catch { failed = error }
            reply = try pending.reply()
        } catch {
            throw .engineUnavailable("\(error)")
        }
        if let failure = try? reply.decode(EngineFailure.self) {
            switch failure.kind {
            case .loadFailed: throw .loadFailed(failure.message)
            case .invalidRequest: throw .engineUnavailable("it refused a request: \(failure.message)")
            }
        }
        if let failed { throw failed }
        do {
            return (try reply.decode(R.self), reply.payload)
        } catch {
            throw .engineUnavailable("\(error)")
        }
    }

    /// `request` as a frame.
    static func frame<E: WireEvent>(_ request: E, payload: [UInt8] = []) throws(SherpaOnnxError) -> Frame {
        do {
            return try Frame(request, payload: payload)
        } catch {
            throw .invalidInput("\(error)")
        }
    }
}
