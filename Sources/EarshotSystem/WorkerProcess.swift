import EarshotWire
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Why a call to a worker process failed.
public enum WorkerError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The executable could not be started.
    case spawnFailed(String)
    /// The worker ended (or its link broke): calls in flight and every later call fail.
    case exited(String)

    public var description: String {
        switch self {
        case .spawnFailed(let why): "could not start the worker: \(why)"
        case .exited(let why): "the worker process ended: \(why)"
        }
    }
}

/// A helper process earshotd spawned, with one end of a socket pair as its standard input: it
/// answers each request frame (data carrying a string `id`) with one reply frame carrying the
/// same `id`. ``call(_:)`` blocks the calling thread (use dedicated threads, never the
/// cooperative pool); any number of calls may be in flight. ``close()`` ends the link and so the
/// worker, which exits at the end of its input; a reader thread reaps it.
public final class WorkerProcess: @unchecked Sendable {
    // @unchecked: `waiting`, `nextID` and `ended` are guarded by `lock`.
    public let pid: pid_t
    public let executable: String
    private let link: BlockingFrameLink
    private let lock = NSLock()
    private var waiting: [String: Reply] = [:]
    private var nextID = 0
    private var ended: WorkerError?
    private var closing = false
    private let onEnd: (@Sendable (_ pid: pid_t, _ why: WorkerError, _ asked: Bool) -> Void)?

    fileprivate final class Reply: @unchecked Sendable {
        // @unchecked: `result` is written once before `done` is signalled and read after.
        let done = DispatchSemaphore(value: 0)
        var result: Result<Frame, WorkerError> = .failure(.exited("no reply"))
    }

    /// Starts `executable` with `arguments`, this process's environment and its standard output
    /// and error, every signal at its default and none blocked. `onEnd` hears, once the worker was reaped, why it ended and whether ``close()``
    /// asked it to.
    public init(executable: String, arguments: [String] = [], limits: FrameLimits,
                onEnd: (@Sendable (_ pid: pid_t, _ why: WorkerError, _ asked: Bool) -> Void)? = nil) throws(WorkerError) {
        var ends: [Int32] = [-1, -1]
        do {
            try systemCall("socketpair") { socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) }
        } catch {
            throw .spawnFailed("\(error)")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // glibc's closefrom file action is not visible to Swift: the worker closes every other
        // inherited descriptor first thing (``closeInheritedDescriptors()``).
        posix_spawn_file_actions_adddup2(&actions, ends[1], 0)
        // Default dispositions and no blocked signals: earshotd ignores SIGTERM and SIGINT (it takes
        // them through Dispatch sources), and the worker would inherit that and outlive a stop.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var every = sigset_t()
        var none = sigset_t()
        sigfillset(&every)
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attributes, &every)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var child: pid_t = 0
        let status = posix_spawn(&child, executable, &actions, &attributes, argv, environ)
        Glibc.close(ends[1])
        guard status == 0 else {
            Glibc.close(ends[0])
            throw .spawnFailed("\(executable): \(String(cString: strerror(status)))")
        }
        pid = child
        self.executable = executable
        self.onEnd = onEnd
        link = BlockingFrameLink(fd: ends[0], limits: limits)
        let reader = Thread { [self] in readReplies() }
        reader.name = "earshot.worker-link"
        reader.start()
    }

    deinit { Glibc.close(link.fd) }

    /// Whether the worker is still running and linked.
    public var isRunning: Bool { lock.withLock { ended == nil } }

    /// Sends `request` with a fresh `id` and waits for the reply with that id. Blocking.
    public func call(_ request: Frame) throws(WorkerError) -> Frame {
        try begin(request).reply()
    }

    /// A request sent whose reply has not been waited for yet.
    public struct PendingCall: Sendable {
        /// The `id` the request went with (and its reply will carry).
        public let id: String
        fileprivate let waiter: Reply

        /// Waits for the reply. Blocking; once.
        public func reply() throws(WorkerError) -> Frame {
            waiter.done.wait()
            return try waiter.result.get()
        }
    }

    /// Sends `request` with a fresh `id` and returns at once: other requests (naming this one by
    /// its id) may go before its reply is waited for. Blocking only while it is written.
    public func begin(_ request: Frame) throws(WorkerError) -> PendingCall {
        let reply = Reply()
        var request = request
        lock.lock()
        if let ended {
            lock.unlock()
            throw ended
        }
        nextID += 1
        let id = String(nextID)
        waiting[id] = reply
        lock.unlock()
        request.data["id"] = .string(id)
        do {
            try link.write(request)
        } catch {
            // The reader sees the broken link too and fails every call, this one included.
            shutdown(link.fd, Int32(SHUT_RDWR))
        }
        return PendingCall(id: id, waiter: reply)
    }

    /// Ends the link: the worker sees the end of its input and exits; calls in flight fail.
    public func close() {
        lock.withLock { closing = true }
        shutdown(link.fd, Int32(SHUT_WR))
    }

    private func readReplies() {
        var reason = "it closed the link"
        do {
            while let frame = try link.read() {
                guard let id = frame.requestID, let reply = lock.withLock({ waiting.removeValue(forKey: id) }) else {
                    reason = "it sent a reply to no request ('\(frame.type)'), so it was killed"
                    kill(pid, SIGKILL)
                    break
                }
                reply.result = .success(frame)
                reply.done.signal()
            }
        } catch {
            reason = "\(error)"
            kill(pid, SIGKILL)
        }
        shutdown(link.fd, Int32(SHUT_RDWR))
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1, errno == EINTR {}
        let exit = status & 0x7f == 0 ? "exit status \((status >> 8) & 0xff)" : "signal \(status & 0x7f)"
        let failure = WorkerError.exited("\(reason) (\(exit))")
        let (orphans, asked) = lock.withLock {
            ended = failure
            defer { waiting = [:] }
            return (Array(waiting.values), closing)
        }
        onEnd?(pid, failure, asked)
        for reply in orphans {
            reply.result = .failure(failure)
            reply.done.signal()
        }
    }

    /// For the worker: closes every descriptor it inherited but its standard input, output and
    /// error (earshotd's sockets and files are not all close-on-exec, and a client connection
    /// held open here would hide its end from the client).
    public static func closeInheritedDescriptors() {
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for fd in open.compactMap(Int32.init) where fd > 2 { Glibc.close(fd) }
    }
}
