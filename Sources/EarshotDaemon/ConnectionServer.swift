import EarshotSystem
import EarshotWire

/// Serves accepted connections, each in its own child task: reads frames, hands each to the
/// harness and writes the reply. A client can only ever disturb its own connection.
struct ConnectionServer: Sendable {
    let harness: DaemonHarness
    let registry: ConnectionRegistry
    let logger: Logger
    let channelOptions: FrameChannel.Options
    /// Refusals, logged once per burst.
    let refusals: RefusalLog
    /// Times every connection's timeouts (the daemon's one clock).
    let clock: any ServiceClock

    /// Serves until `accepted` ends (the listener stopped) and every connection has closed.
    /// `networkAppID`: the app every TCP peer acts as.
    func serve(_ accepted: AsyncStream<AcceptedConnection>, networkAppID: String? = nil) async {
        await withDiscardingTaskGroup { group in
            for await connection in accepted {
                group.addTask { await serve(connection, networkAppID: networkAppID) }
            }
        }
    }

    private func serve(_ connection: AcceptedConnection, networkAppID: String?) async {
        let channel = FrameChannel(fd: connection.fd, options: channelOptions, label: "earshot.connection", clock: clock)
        channel.start()
        let state = ConnectionState(channel: channel)
        let id: Int
        switch await registry.add(state, peer: connection.peer, admin: connection.admin, host: connection.host) {
        case .success(let admitted): id = admitted
        case .failure(let reason):
            let peer = connection.host.map { "Wyoming-TCP peer \($0)" } ?? "uid \(connection.peer.uid) on the socket"
            refusals.refused(peer, reason.message, ["peer_uid": "\(connection.peer.uid)", "peer_pid": "\(connection.peer.pid)"])
            channel.post(DaemonHarness.errorFrame(reason, id: nil))
            channel.closeAfterFlush()
            return
        }
        let fields = ["connection": "\(id)", "peer_uid": "\(connection.peer.uid)", "peer_pid": "\(connection.peer.pid)"]
        logger.debug("connection opened", fields)
        var context = RequestContext(connectionID: id, peer: connection.peer, admin: connection.admin, state: state)
        if connection.network {
            context.network = true
            context.appID = networkAppID
        }
        // Weak: the channel's check must not keep the state (and its Wyoming job) alive after the connection.
        channel.setBusyCheck { [weak state] in state.map { harness.isBusy(id, state: $0) } ?? false }
        let progress: @Sendable (Frame) -> Void = { channel.post($0) }
        // Frames the client sent, by type: the closing log line shows how many round trips it took.
        var received: [String: Int] = [:]
        do {
            try await withThrowingDiscardingTaskGroup { group in
                for try await frame in channel.frames {
                    received[frame.type, default: 0] += 1
                    state.requestStarted()
                    guard await registry.takesRequests else {
                        state.requestEnded()
                        // Shutting down: while the connection's sessions are being finished it
                        // stays open for their final results, and what it sends is refused.
                        guard harness.hasSessions(id) else { break }
                        if let request = frame.requestID { channel.post(DaemonHarness.errorFrame(WireError.daemonShuttingDown, id: request)) }
                        continue
                    }
                    if harness.isLongRunning(frame.type) {
                        // Downloads may take minutes: serve them beside the connection's other requests.
                        var snapshot = context
                        group.addTask {
                            for reply in await harness.handle(frame, context: &snapshot, progress: progress) { try? await channel.send(reply) }
                            state.requestEnded()
                            await registry.requestEnded(id)
                        }
                    } else {
                        do {
                            for reply in await harness.handle(frame, context: &context, progress: progress) { try await channel.send(reply) }
                        } catch {
                            state.requestEnded()
                            throw error
                        }
                        state.requestEnded()
                        await registry.requestEnded(id)
                    }
                }
            }
            channel.closeAfterFlush()
        } catch let error as FrameError {
            logger.info("closing connection after malformed input: \(error)", fields)
            channel.post(DaemonHarness.errorFrame(error, id: nil))
            channel.closeAfterFlush()
        } catch {
            logger.info("connection ended: \(error)", fields)
            channel.close()
        }
        await harness.connectionClosed(context)
        await registry.remove(id)
        logger.debug("connection closed", fields.merging(["received": Self.tally(received)]) { $1 })
    }

    /// `type:count,…` sorted by type (the `received` field of `connection closed`).
    static func tally(_ counts: [String: Int]) -> String {
        counts.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }.joined(separator: ",")
    }
}
