import EarshotSystem
import EarshotWire

/// Serves accepted connections, each in its own child task: reads frames, hands each to the
/// harness and writes the reply. A client can only ever disturb its own connection.
struct ConnectionServer: Sendable {
    let harness: DaemonHarness
    let registry: ConnectionRegistry
    let logger: Logger
    let channelOptions: FrameChannel.Options
    let maxConnections: Int

    /// Serves until `accepted` ends (the listener stopped) and every connection has closed.
    func serve(_ accepted: AsyncStream<AcceptedConnection>) async {
        await withDiscardingTaskGroup { group in
            for await connection in accepted {
                group.addTask { await serve(connection) }
            }
        }
    }

    private func serve(_ connection: AcceptedConnection) async {
        let channel = FrameChannel(fd: connection.fd, options: channelOptions, label: "earshot.connection")
        channel.start()
        guard let id = await registry.add(channel, peer: connection.peer, limit: maxConnections) else {
            let reason = await registry.shuttingDown
                ? WireError(.shuttingDown, "earshotd is shutting down")
                : WireError(.insufficientResources, "too many connections (limit \(maxConnections))")
            channel.post(DaemonHarness.errorFrame(reason, id: nil))
            channel.closeAfterFlush()
            return
        }
        let fields = ["connection": "\(id)", "peer_uid": "\(connection.peer.uid)", "peer_pid": "\(connection.peer.pid)"]
        logger.debug("connection opened", fields)
        var context = RequestContext(connectionID: id, peer: connection.peer, admin: connection.admin)
        do {
            for try await frame in channel.frames {
                guard await registry.setBusy(id, true) else { break }
                let reply = await harness.handle(frame, context: &context)
                try await channel.send(reply)
                guard await registry.setBusy(id, false) else { break }
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
        await registry.remove(id)
        logger.debug("connection closed", fields)
    }
}
