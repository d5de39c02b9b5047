import Dispatch
import EarshotSystem
import Foundation

/// Why the daemon could not start listening.
public enum ListenerError: Error, CustomStringConvertible {
    case anotherDaemonAnswers(String)
    case pathOccupied(String)
    case badActivatedSocket(Int32)
    /// The user socket's directory is not the user's own.
    case unsafeDirectory(SecureDirectoryError)
    case system(SystemError)

    public var description: String {
        switch self {
        case .anotherDaemonAnswers(let path): "another earshotd already answers on \(path)"
        case .pathOccupied(let path): "\(path) exists and is not a socket; refusing to replace it"
        case .badActivatedSocket(let fd): "socket-activated fd \(fd) is not a listening Unix stream socket"
        case .unsafeDirectory(let error): "\(error)"
        case .system(let error): "\(error)"
        }
    }
}

/// A connection the listener accepted, with the peer identity resolved off the cooperative pool.
struct AcceptedConnection: Sendable {
    var fd: Int32
    var peer: PeerCredentials
    var admin: Bool
    /// Accepted over TCP: the peer has no kernel identity (``peer`` is the configured one) and
    /// reaches only the routes open to the network.
    var network = false
    /// A TCP peer's address (without port): connections are limited per address.
    var host: String?
}

/// The listening socket: our own (created, stale one replaced, removed at stop) or one passed by
/// systemd socket activation. Accepting runs on a Dispatch source.
final class Listener: @unchecked Sendable {
    let fd: Int32
    /// The socket path, when known.
    let path: String?
    let activated: Bool
    private let ownsPath: Bool
    private let queue = DispatchQueue(label: "earshot.listener")
    private var source: DispatchSourceRead?
    private var backingOff = false

    /// For a TCP listener: who every peer acts as.
    private let networkIdentity: PeerCredentials?

    private init(fd: Int32, path: String?, activated: Bool, ownsPath: Bool, networkIdentity: PeerCredentials? = nil) {
        self.fd = fd
        self.path = path
        self.activated = activated
        self.ownsPath = ownsPath
        self.networkIdentity = networkIdentity
    }

    /// A TCP listener on `host:port`; every peer acts as `identity` and is never an admin.
    static func tcp(host: String, port: UInt16, identity: PeerCredentials) throws(ListenerError) -> Listener {
        do {
            let fd = try TCPSocket.listen(host: host, port: port)
            return Listener(fd: fd, path: nil, activated: false, ownsPath: false, networkIdentity: identity)
        } catch {
            throw .system(error)
        }
    }

    /// The TCP port (for a TCP listener).
    var port: UInt16? { networkIdentity == nil ? nil : TCPSocket.boundPort(fd) }

    /// How the socket's directory is made.
    enum Directory {
        /// The user daemon's default socket: the runtime directories must be the user's own
        /// (``SocketLocations/prepareUserSocketDirectory(environment:)``), created 0700 if missing.
        case userRuntime(environment: [String: String])
        /// An explicit or system path: created (with parents) with these permissions if missing.
        case create(permissions: Int)
    }

    /// Takes the socket-activated fd if there is one, else binds `path` with `mode`.
    static func open(path: String, mode: mode_t, directory policy: Directory, systemd: Systemd) throws(ListenerError) -> Listener {
        if let fd = systemd.activatedSockets().first {
            guard systemd.isListeningUnixStream(fd) else { throw .badActivatedSocket(fd) }
            do { try UnixSocket.prepareInherited(fd) } catch { throw .system(error) }
            return Listener(fd: fd, path: UnixSocket.boundPath(fd), activated: true, ownsPath: false)
        }
        switch policy {
        case .userRuntime(let environment):
            do { try SocketLocations.prepareUserSocketDirectory(environment: environment) } catch { throw .unsafeDirectory(error) }
        case .create(let permissions):
            let directory = (path as NSString).deletingLastPathComponent
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: permissions])
            } catch {
                throw .system(SystemError("mkdir(\(directory))", errno: (error as NSError).code == NSFileWriteNoPermissionError ? EACCES : EIO))
            }
        }
        var st = stat()
        if lstat(path, &st) == 0 {
            guard (st.st_mode & S_IFMT) == S_IFSOCK else { throw .pathOccupied(path) }
            do {
                let probe = try UnixSocket.connect(path: path)
                close(probe)
                throw ListenerError.anotherDaemonAnswers(path)
            } catch let error as ListenerError {
                throw error
            } catch {
                // Nobody answers: a stale socket from a daemon that died.
                unlink(path)
            }
        }
        do {
            let fd = try UnixSocket.listen(path: path, mode: mode)
            return Listener(fd: fd, path: path, activated: false, ownsPath: true)
        } catch {
            throw .system(error)
        }
    }

    /// Accepted connections until ``stop()``. `authorize` runs on the listener's queue.
    func connections(authorize: @escaping @Sendable (PeerCredentials) -> Bool, onError: @escaping @Sendable (SystemError) -> Void) -> AsyncStream<AcceptedConnection> {
        let (stream, continuation) = AsyncStream.makeStream(of: AcceptedConnection.self)
        queue.sync {
            let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
            source.setEventHandler { [fd, networkIdentity] in
                while true {
                    do throws(SystemError) {
                        guard let client = try UnixSocket.accept(fd) else { return }
                        if let networkIdentity {
                            continuation.yield(AcceptedConnection(fd: client, peer: networkIdentity, admin: false, network: true,
                                                                  host: TCPSocket.peer(client)?.host ?? "unknown"))
                            continue
                        }
                        do throws(SystemError) {
                            let peer = try PeerCredentials.of(socket: client)
                            continuation.yield(AcceptedConnection(fd: client, peer: peer, admin: authorize(peer)))
                        } catch {
                            close(client)
                            onError(error)
                        }
                    } catch {
                        // Out of fds or similar: back off instead of spinning on a readable socket.
                        onError(error)
                        self.backOff()
                        return
                    }
                }
            }
            source.setCancelHandler { [fd, ownsPath, path] in
                close(fd)
                if ownsPath, let path { unlink(path) }
                continuation.finish()
            }
            self.source = source
            source.resume()
        }
        return stream
    }

    private func backOff() {
        guard let source, !backingOff else { return }
        backingOff = true
        source.suspend()
        queue.asyncAfter(deadline: .now() + 0.1) { [self] in resumeAfterBackOff() }
    }

    private func resumeAfterBackOff() {
        guard backingOff else { return }
        backingOff = false
        source?.resume()
    }

    /// Stops accepting, closes the socket and removes the path we created.
    func stop() {
        queue.sync {
            if backingOff { resumeAfterBackOff() }
            source?.cancel()
            source = nil
        }
    }
}
