import CPulse
import EarshotAudio
import Foundation

/// A source of the sound server, as its introspection API describes it.
package struct SoundServerSource: Sendable, Hashable {
    /// The name clients record from (`pactl list sources short`).
    package var name: String
    package var description: String
    /// A sink's monitor (what that output plays), not an input.
    package var isMonitor: Bool
    /// The server's default source.
    package var isDefault: Bool
}

/// libpulse's entry points, opened once when a client first records or lists sources (`CPulse`
/// opens the libraries with dlopen rather than linking them: see its shim.h).
enum Pulse {
    /// The loaded entry points, or why libpulse cannot be used (it is not installed).
    static let loaded: Result<earshot_pulse, AudioError> = {
        let api = UnsafeMutablePointer<earshot_pulse>.allocate(capacity: 1)
        defer { api.deallocate() }
        var reason = [CChar](repeating: 0, count: 512)
        guard earshot_pulse_load(api, &reason, reason.count) == 0 else {
            return .failure(.unreadable(path: "the sound server", reason: "libpulse is not available (\(String(cBuffer: reason)))"))
        }
        return .success(api.pointee)
    }()

    /// The entry points; throws ``AudioError/unreadable(path:reason:)`` when libpulse is missing.
    static func api() throws(AudioError) -> earshot_pulse { try loaded.get() }

    /// libpulse's text for error `code`.
    static func message(_ pa: earshot_pulse, _ code: Int32) -> String {
        pa.pa_strerror(code).map { String(cString: $0) } ?? "error \(code)"
    }
}

/// Lists the sound server's sources through libpulse's asynchronous API on a private main loop.
/// Blocking (one round trip to the server, at most ``timeout``): call it on a dedicated thread.
package enum SoundServerSources {
    /// How long a server may take to answer.
    package static let timeout: Duration = .seconds(5)

    /// The sources of the server `$PULSE_SERVER` names (else the default one); never starts a
    /// server. Throws ``AudioError/unreadable(path:reason:)`` with the server's reason.
    package static func list(application: String) throws(AudioError) -> [SoundServerSource] {
        let pa = try Pulse.api()
        guard let mainloop = pa.pa_mainloop_new() else { throw failure("cannot create a main loop") }
        defer { pa.pa_mainloop_free(mainloop) }
        guard let context = pa.pa_context_new(pa.pa_mainloop_get_api(mainloop), application) else { throw failure("cannot create a context") }
        defer { pa.pa_context_unref(context) }
        guard pa.pa_context_connect(context, nil, PA_CONTEXT_NOAUTOSPAWN, nil) >= 0 else { throw failure(pa, context) }
        defer { pa.pa_context_disconnect(context) }
        let loop = Loop(pa: pa, mainloop: mainloop, context: context, deadline: .now + timeout)
        while true {
            let state = pa.pa_context_get_state(context)
            if state == PA_CONTEXT_READY { break }
            if state == PA_CONTEXT_FAILED || state == PA_CONTEXT_TERMINATED { throw failure(pa, context) }
            try loop.iterate()
        }
        let found = Found()
        let userdata = Unmanaged.passUnretained(found).toOpaque()
        try complete(pa.pa_context_get_server_info(context, { _, info, userdata in
            guard let info, let userdata, let name = info.pointee.default_source_name else { return }
            Unmanaged<Found>.fromOpaque(userdata).takeUnretainedValue().defaultSource = String(cString: name)
        }, userdata), loop)
        try complete(pa.pa_context_get_source_info_list(context, { _, info, last, userdata in
            guard last == 0, let info, let userdata, let name = info.pointee.name else { return }
            let description = info.pointee.description.map { String(cString: $0) } ?? ""
            Unmanaged<Found>.fromOpaque(userdata).takeUnretainedValue().sources.append(
                SoundServerSource(name: String(cString: name), description: description,
                                  isMonitor: info.pointee.monitor_of_sink != UInt32.max, isDefault: false))
        }, userdata), loop)
        return withExtendedLifetime(found) {
            found.sources.map { source in
                var source = source
                source.isDefault = source.name == found.defaultSource
                return source
            }
        }
    }

    /// What the callbacks collect (used on the calling thread only).
    private final class Found {
        var defaultSource: String?
        var sources: [SoundServerSource] = []
    }

    /// The main loop, run in steps of at most 0.1 s until a deadline.
    private struct Loop {
        let pa: earshot_pulse
        let mainloop: OpaquePointer
        let context: OpaquePointer
        let deadline: ContinuousClock.Instant

        /// One pass: waits up to 0.1 s for the server, then dispatches what arrived.
        func iterate() throws(AudioError) {
            guard ContinuousClock.now < deadline else { throw failure("no answer within \(SoundServerSources.timeout)") }
            guard pa.pa_mainloop_prepare(mainloop, 100_000) >= 0, pa.pa_mainloop_poll(mainloop) >= 0, pa.pa_mainloop_dispatch(mainloop) >= 0 else {
                throw failure(pa, context)
            }
        }
    }

    /// Runs the main loop until `operation` is done.
    private static func complete(_ operation: OpaquePointer?, _ loop: Loop) throws(AudioError) {
        guard let operation else { throw failure(loop.pa, loop.context) }
        defer { loop.pa.pa_operation_unref(operation) }
        while loop.pa.pa_operation_get_state(operation) == PA_OPERATION_RUNNING { try loop.iterate() }
    }

    private static func failure(_ pa: earshot_pulse, _ context: OpaquePointer) -> AudioError {
        failure(Pulse.message(pa, pa.pa_context_errno(context)))
    }

    private static func failure(_ reason: String) -> AudioError { .unreadable(path: "the sound server's source list", reason: reason) }
}
