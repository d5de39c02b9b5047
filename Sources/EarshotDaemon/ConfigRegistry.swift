import EarshotAssets
import EarshotSystem
import EarshotWire
import Foundation

/// One config key: where it lives, its default, what it means and which values it accepts.
public struct ConfigKey: Sendable {
    public let section: String
    public let name: String
    public let defaultValue: String
    public let doc: String
    /// Repeatable keys collect every assignment; an empty assignment clears the list (systemd style).
    /// Their default is a space-separated list.
    public let repeatable: Bool
    /// A bad value of a fatal key stops the daemon instead of keeping the previous value: keys
    /// whose fallback would be less safe than what the admin meant (a mistyped `SocketMode` must not
    /// leave the socket 0666).
    public let fatal: Bool
    let validate: @Sendable (String) -> String?

    /// `Section.Name`.
    public var id: String { "\(section).\(name)" }

    init(_ section: String, _ name: String, _ defaultValue: String, repeatable: Bool = false, fatal: Bool = false, doc: String, validate: @escaping @Sendable (String) -> String? = { _ in nil }) {
        self.section = section
        self.name = name
        self.defaultValue = defaultValue
        self.doc = doc
        self.repeatable = repeatable
        self.fatal = fatal
        self.validate = validate
    }
}

/// Value checks shared by the registry.
enum ConfigValidation {
    static func integer(in range: ClosedRange<Int>) -> @Sendable (String) -> String? {
        { value in
            guard let n = Int(value), range.contains(n) else { return "expected an integer in \(range.lowerBound)...\(range.upperBound)" }
            return nil
        }
    }

    static func seconds(in range: ClosedRange<Double>) -> @Sendable (String) -> String? {
        { value in
            guard let n = Double(value), range.contains(n) else { return "expected seconds in \(range.lowerBound)...\(range.upperBound)" }
            return nil
        }
    }

    /// `HOST:PORT` (or `tcp://HOST:PORT`) with a numeric host, or empty (off).
    static let tcpEndpointOrEmpty: @Sendable (String) -> String? = { value in
        value.isEmpty || TCPSocket.endpoint(value) != nil ? nil : "expected [tcp://]HOST:PORT with a numeric host"
    }

    /// A user name or uid (``uid(ofUser:)`` resolves it).
    static let user: @Sendable (String) -> String? = { value in uid(ofUser: value) != nil ? nil : "expected a user name or uid" }

    /// The uid of a user name or numeric uid, nil if neither.
    static func uid(ofUser value: String) -> UInt32? { UInt32(value) ?? getpwnam(value).map { $0.pointee.pw_uid } }

    static let octalMode: @Sendable (String) -> String? = { value in
        guard let n = Int(value, radix: 8), (0...0o777).contains(n) else { return "expected an octal file mode such as 0660" }
        return nil
    }

    static func oneOf(_ choices: [String]) -> @Sendable (String) -> String? {
        { value in choices.contains(value) ? nil : "expected one of \(choices.joined(separator: ", "))" }
    }

    static let url: @Sendable (String) -> String? = { value in
        ["http://", "https://", "file://"].contains { value.hasPrefix($0) } ? nil : "expected an http://, https:// or file:// URL"
    }

    static let catalogSource: @Sendable (String) -> String? = { value in
        if OCIReference.isOCI(value) {
            do { _ = try OCIReference.parse(value) } catch { return "\(error)" }
            return nil
        }
        return url(value)
    }

    static let absolutePath: @Sendable (String) -> String? = { value in
        value.hasPrefix("/") ? nil : "expected an absolute path"
    }

    static let appQuota: @Sendable (String) -> String? = { value in
        let parts = value.split(separator: "=", maxSplits: 1)
        guard parts.count == 2, !parts[0].isEmpty, let n = Int(parts[1]), n >= 0 else { return "expected APP_ID=N" }
        return nil
    }

    static let absolutePathOrEmpty: @Sendable (String) -> String? = { value in
        value.isEmpty || value.hasPrefix("/") ? nil : "expected an absolute path"
    }
}

/// Every key earshotd reads, by name: look-ups take one of these, so a key that is not registered
/// cannot be asked for, and ``key`` is its one definition (default, doc, validation). The order of
/// the cases is the order of `Config/earshotd.conf`.
public enum Setting: String, CaseIterable, Sendable {
    case daemonSocket = "Daemon.Socket"
    case daemonSocketMode = "Daemon.SocketMode"
    case daemonStateDirectory = "Daemon.StateDirectory"
    case daemonCacheDirectory = "Daemon.CacheDirectory"
    case daemonAdminGroup = "Daemon.AdminGroup"
    case daemonLogLevel = "Daemon.LogLevel"
    case daemonShutdownTimeoutSec = "Daemon.ShutdownTimeoutSec"
    case limitsMaxConnections = "Limits.MaxConnections"
    case limitsMaxConnectionsPerUser = "Limits.MaxConnectionsPerUser"
    case limitsMaxConnectionsPerAddress = "Limits.MaxConnectionsPerAddress"
    case limitsAdminReservedConnections = "Limits.AdminReservedConnections"
    case limitsHandshakeTimeoutSec = "Limits.HandshakeTimeoutSec"
    case limitsIdleTimeoutSec = "Limits.IdleTimeoutSec"
    case limitsMaxHeaderBytes = "Limits.MaxHeaderBytes"
    case limitsMaxDataBytes = "Limits.MaxDataBytes"
    case limitsMaxPayloadBytes = "Limits.MaxPayloadBytes"
    case limitsOutputStallTimeoutSec = "Limits.OutputStallTimeoutSec"
    case analysisMaxConcurrentAnalyses = "Analysis.MaxConcurrentAnalyses"
    case analysisMaxModelMemoryMiB = "Analysis.MaxModelMemoryMiB"
    case analysisMaxQueued = "Analysis.MaxQueued"
    case analysisMaxConcurrentAnalysesHard = "Analysis.MaxConcurrentAnalysesHard"
    case analysisLingerSeconds = "Analysis.LingerSeconds"
    case analysisMaxKeepAliveSec = "Analysis.MaxKeepAliveSec"
    case analysisBeamSize = "Analysis.BeamSize"
    case analysisConditionOnPreviousText = "Analysis.ConditionOnPreviousText"
    case analysisInferenceThreads = "Analysis.InferenceThreads"
    case analysisBatchThreads = "Analysis.BatchThreads"
    case analysisRecordingWindowSec = "Analysis.RecordingWindowSec"
    case analysisSpeculativeDecode = "Analysis.SpeculativeDecode"
    case catalogURL = "Catalog.URL"
    case catalogKeysDirectory = "Catalog.KeysDirectory"
    case assetsMaxReservedLocales = "Assets.MaxReservedLocales"
    case assetsMaxReservedLocalesPerUser = "Assets.MaxReservedLocalesPerUser"
    case assetsMaxAppsPerUser = "Assets.MaxAppsPerUser"
    case assetsAppQuota = "Assets.AppQuota"
    case assetsReservationExpirySec = "Assets.ReservationExpirySec"
    case assetsGCGracePeriodSec = "Assets.GCGracePeriodSec"
    case assetsKeepPreviousForSec = "Assets.KeepPreviousForSec"
    case assetsMaxStoreSize = "Assets.MaxStoreSize"
    case assetsGCIntervalSec = "Assets.GCIntervalSec"
    case assetsUpdateIntervalSec = "Assets.UpdateIntervalSec"
    case assetsUpdateBandwidthLimit = "Assets.UpdateBandwidthLimit"
    case downloadConnectTimeoutSec = "Download.ConnectTimeoutSec"
    case downloadLowSpeedLimit = "Download.LowSpeedLimit"
    case downloadLowSpeedTimeSec = "Download.LowSpeedTimeSec"
    case downloadMaxAttemptsPerMirror = "Download.MaxAttemptsPerMirror"
    case downloadCAFile = "Download.CAFile"
    case registryAuthFile = "Registry.AuthFile"
    case registryPlainHTTPHosts = "Registry.PlainHTTPHosts"
    case wyomingListen = "Wyoming.Listen"
    case wyomingUser = "Wyoming.User"
    case wyomingAppID = "Wyoming.AppID"
    case wyomingZeroconf = "Wyoming.Zeroconf"
    case httpSocket = "HTTP.Socket"
    case httpListen = "HTTP.Listen"
    case httpKeyFile = "HTTP.KeyFile"
    case httpAllowAnonymous = "HTTP.AllowAnonymous"
    case httpTCPMetrics = "HTTP.TCPMetrics"
    case httpUser = "HTTP.User"
    case httpMaxBodyMiB = "HTTP.MaxBodyMiB"
    case httpMaxConnections = "HTTP.MaxConnections"
    case httpMaxConnectionsPerPeer = "HTTP.MaxConnectionsPerPeer"
    case httpIdleTimeoutSec = "HTTP.IdleTimeoutSec"
    case httpHeaderTimeoutSec = "HTTP.HeaderTimeoutSec"
    case httpMinUploadBytesPerSec = "HTTP.MinUploadBytesPerSec"
    case httpUploadRateWindowSec = "HTTP.UploadRateWindowSec"
    case httpMaxUploadSec = "HTTP.MaxUploadSec"

    /// The key's definition.
    public var key: ConfigKey {
        switch self {
        case .daemonSocket: ConfigKey("Daemon", "Socket", "", doc: "Listening socket path. Empty: /run/earshot/earshot.sock (system) or $XDG_RUNTIME_DIR/earshot/earshot.sock (--user). Ignored under socket activation.", validate: ConfigValidation.absolutePathOrEmpty)
        case .daemonSocketMode: ConfigKey("Daemon", "SocketMode", "0666", fatal: true, doc: "File mode of the socket the daemon creates itself (octal). Clients are authorized by peer credentials, so any local user may connect by default. An invalid value stops the daemon from starting.", validate: ConfigValidation.octalMode)
        case .daemonStateDirectory: ConfigKey("Daemon", "StateDirectory", "", doc: "Installed assets and state.db. Empty: $STATE_DIRECTORY (systemd), else /var/lib/earshot or $XDG_STATE_HOME/earshot.", validate: ConfigValidation.absolutePathOrEmpty)
        case .daemonCacheDirectory: ConfigKey("Daemon", "CacheDirectory", "", doc: "Partial downloads. Empty: $CACHE_DIRECTORY (systemd), else /var/cache/earshot or $XDG_CACHE_HOME/earshot.", validate: ConfigValidation.absolutePathOrEmpty)
        case .daemonAdminGroup: ConfigKey("Daemon", "AdminGroup", "earshot-admin", doc: "Members of this group (and root, and the daemon's own user) may use admin operations.")
        case .daemonLogLevel: ConfigKey("Daemon", "LogLevel", "info", doc: "Least severe message logged: debug, info, notice, warning, error.", validate: ConfigValidation.oneOf(LogLevel.allCases.map(\.rawValue)))
        case .daemonShutdownTimeoutSec: ConfigKey("Daemon", "ShutdownTimeoutSec", "10", doc: "On SIGTERM, how long sessions may take to finish their input and in-flight requests to run before both are cancelled and the connections closed.", validate: ConfigValidation.seconds(in: 0...3600))
        case .limitsMaxConnections: ConfigKey("Limits", "MaxConnections", "256", doc: "Most simultaneous client connections; more are refused with insufficientResources.", validate: ConfigValidation.integer(in: 1...65536))
        case .limitsMaxConnectionsPerUser: ConfigKey("Limits", "MaxConnectionsPerUser", "32", doc: "Most simultaneous connections one non-admin uid may hold; more are refused with insufficientResources. Admins (root, the daemon's user, AdminGroup) have no per-user cap.", validate: ConfigValidation.integer(in: 1...65536))
        case .limitsMaxConnectionsPerAddress: ConfigKey("Limits", "MaxConnectionsPerAddress", "8", doc: "Most simultaneous Wyoming-over-TCP connections from one network address, within the Wyoming user's MaxConnectionsPerUser: one host cannot use up what every other host shares.", validate: ConfigValidation.integer(in: 1...65536))
        case .limitsAdminReservedConnections: ConfigKey("Limits", "AdminReservedConnections", "16", doc: "Connection slots only admins may take: non-admin clients together hold at most MaxConnections minus this many (and at least one), so an admin can always connect.", validate: ConfigValidation.integer(in: 0...65536))
        case .limitsHandshakeTimeoutSec: ConfigKey("Limits", "HandshakeTimeoutSec", "10", doc: "A new connection must send its first complete frame within this many seconds, and every later frame must arrive complete within this long of its first byte; slower peers (one byte a second) are disconnected. Time the daemon itself stops reading (back-pressure) does not count.", validate: ConfigValidation.seconds(in: 0.05...3600))
        case .limitsIdleTimeoutSec: ConfigKey("Limits", "IdleTimeoutSec", "300", doc: "A connection with nothing in flight (no request being served, no analysis session, no Wyoming transcription) and no traffic for this long is closed. 0: never.", validate: ConfigValidation.seconds(in: 0...(7 * 86400)))
        case .limitsMaxHeaderBytes: ConfigKey("Limits", "MaxHeaderBytes", "\(FrameLimits.default.maxHeaderBytes)", doc: "Longest frame header line a client may send.", validate: ConfigValidation.integer(in: 1024...(1 << 24)))
        case .limitsMaxDataBytes: ConfigKey("Limits", "MaxDataBytes", "\(FrameLimits.default.maxDataBytes)", doc: "Largest frame data block a client may send.", validate: ConfigValidation.integer(in: 1024...(1 << 28)))
        case .limitsMaxPayloadBytes: ConfigKey("Limits", "MaxPayloadBytes", "\(FrameLimits.default.maxPayloadBytes)", doc: "Largest frame payload (audio chunk) a client may send.", validate: ConfigValidation.integer(in: 1024...(1 << 30)))
        case .limitsOutputStallTimeoutSec: ConfigKey("Limits", "OutputStallTimeoutSec", "30", doc: "A client that reads none of its pending output for this long is disconnected.", validate: ConfigValidation.seconds(in: 1...3600))
        case .analysisMaxConcurrentAnalyses: ConfigKey("Analysis", "MaxConcurrentAnalyses", "4", doc: "Most analysis sessions at once; more wait for a slot (MaxQueued), first come first served.", validate: ConfigValidation.integer(in: 1...1024))
        case .analysisMaxModelMemoryMiB: ConfigKey("Analysis", "MaxModelMemoryMiB", "0", doc: "Most memory loaded models may take together (each model's resident memory as measured at its load). Before a load would pass it, models no session uses are unloaded, least recently used first, whatever their retention; a load that still does not fit is refused with insufficientResources (one model always loads). 0: half of this machine's memory.", validate: ConfigValidation.integer(in: 0...(1 << 22)))
        case .analysisMaxQueued: ConfigKey("Analysis", "MaxQueued", "16", doc: "Opens that wait for a free slot when MaxConcurrentAnalyses run (the socket's client is told its place with earshot.analyzer.progress); beyond them an open is refused with insufficientResources. 0: refused at once.", validate: ConfigValidation.integer(in: 0...4096))
        case .analysisMaxConcurrentAnalysesHard: ConfigKey("Analysis", "MaxConcurrentAnalysesHard", "16", doc: "Cap for sessions that set ignoresResourceLimits.", validate: ConfigValidation.integer(in: 1...4096))
        case .analysisLingerSeconds: ConfigKey("Analysis", "LingerSeconds", "300", doc: "How long models of sessions with lingering retention (what the earshot CLI, Wyoming and HTTP clients use) stay loaded after their last use.", validate: ConfigValidation.seconds(in: 0...86400))
        case .analysisMaxKeepAliveSec: ConfigKey("Analysis", "MaxKeepAliveSec", "3600", doc: "Longest keep-alive a session may ask for (`earshot transcribe --keep-alive`, the wire's keep_alive_seconds); longer requests are cut to this, and the reply says so.", validate: ConfigValidation.seconds(in: 0...(7 * 86400)))
        case .analysisBeamSize: ConfigKey("Analysis", "BeamSize", "5", doc: "Whisper's beam for final results (faster-whisper's default; 1: greedy, faster and less accurate). A request may ask for its own (`earshot transcribe --beam N`). Volatile (live, in-progress) results are always greedy.", validate: ConfigValidation.integer(in: 1...16))
        case .analysisConditionOnPreviousText: ConfigKey("Analysis", "ConditionOnPreviousText", "yes", doc: "yes: a whole recording's Whisper windows decode one after another, each prompted with the text of the windows before it (faster-whisper's condition_on_previous_text: the end of all the text since a window whose result needed a temperature above 0.5, which passes nothing on; a user's prompt and contextual strings keep their place, the earlier text fills the rest); reads long recordings better, at about 1.1-1.2x the time. no: windows decode side by side on the decode lanes, each on its own.", validate: ConfigValidation.oneOf(["yes", "no"]))
        case .analysisInferenceThreads: ConfigKey("Analysis", "InferenceThreads", "2", doc: "ONNX Runtime threads per Whisper decode of a lone segment (on 2 cores, 2 threads make a short utterance about 1.4x faster than 1).", validate: ConfigValidation.integer(in: 1...256))
        case .analysisBatchThreads: ConfigKey("Analysis", "BatchThreads", "0", doc: "0 (the default since issue 29): a session's overlapping decodes (a long recording's windows) share its one loaded model, so every session of a model uses one copy of its weights. 1 or more: once a session's decodes overlap they move to a second copy of the model with this many threads, shared daemon-wide, loaded then and released with the session's retention; on 2 cores with Earshot's decoder the copy made base read a 5.9 min recording in 17.1 s instead of 22.1 s, for 1197 instead of 694 MiB peak memory (earshotd and its engine). Used only when below InferenceThreads.", validate: ConfigValidation.integer(in: 0...256))
        case .analysisRecordingWindowSec: ConfigKey("Analysis", "RecordingWindowSec", "20", doc: "A whole recording (`earshot transcribe FILE`, the HTTP API, the library's file input) is decoded up to this many seconds of consecutive speech at once: Whisper hears each utterance with its neighbours, which lowers the error rate, and makes fewer decodes. Each utterance still gets its own result. A 20 s window holds ONNX Runtime working memory for 30 s of features (Whisper base: about 150 MiB more per model copy than one utterance). 0: one utterance per decode, as for live audio.", validate: ConfigValidation.seconds(in: 0...20))
        case .analysisSpeculativeDecode: ConfigKey("Analysis", "SpeculativeDecode", "yes", doc: "yes: a whole recording that fits in one RecordingWindowSec window is decoded as soon as its input ends when silero still has at least half of it to read (a file arrives faster than real time, so its window would otherwise wait for the detector; input sent in real time, as Wyoming's, has been read by then and never speculates); the result is kept when the detector's segments make that one window with at most 2 s of the recording outside them, else the window is decoded as usual. no: every window waits for the detector.", validate: ConfigValidation.oneOf(["yes", "no"]))
        case .catalogURL: ConfigKey("Catalog", "URL", EmbeddedDefaults.catalogURL, repeatable: true, doc: "Signed catalog sources (the signature is at URL.minisig), merged in order. Repeat the key for several; an empty assignment clears the list. oci://HOST[:PORT]/REPOSITORY[:TAG|@sha256:DIGEST] reads a catalog artifact from a registry and fetches its assets there by digest (Docs/FLEET.md).", validate: ConfigValidation.catalogSource)
        case .catalogKeysDirectory: ConfigKey("Catalog", "KeysDirectory", "\(EmbeddedDefaults.keysDirectory) /etc/earshot/keys.d", repeatable: true, doc: "Directories of trusted minisign public keys (*.pub). Repeatable.", validate: ConfigValidation.absolutePath)
        case .assetsMaxReservedLocales: ConfigKey("Assets", "MaxReservedLocales", "3", doc: "Most locales one app (uid and app id) may reserve; installs that would exceed it fail with quotaExceeded.", validate: ConfigValidation.integer(in: 0...1000))
        case .assetsMaxReservedLocalesPerUser: ConfigKey("Assets", "MaxReservedLocalesPerUser", "8", doc: "Most distinct locales one user (uid) may reserve across all its app ids, so rotating app ids cannot multiply MaxReservedLocales.", validate: ConfigValidation.integer(in: 0...10000))
        case .assetsMaxAppsPerUser: ConfigKey("Assets", "MaxAppsPerUser", "16", doc: "Most app ids of one user that may hold reservations at once.", validate: ConfigValidation.integer(in: 1...10000))
        case .assetsAppQuota: ConfigKey("Assets", "AppQuota", "", repeatable: true, doc: "Per-app override of MaxReservedLocales, as APP_ID=N. Repeatable.", validate: ConfigValidation.appQuota)
        case .assetsReservationExpirySec: ConfigKey("Assets", "ReservationExpirySec", "7776000", doc: "A reservation unused this long (90 days) expires.", validate: ConfigValidation.seconds(in: 60...(3650 * 86400)))
        case .assetsGCGracePeriodSec: ConfigKey("Assets", "GCGracePeriodSec", "86400", doc: "How long an asset no reservation needs is kept before garbage collection removes it.", validate: ConfigValidation.seconds(in: 0...(3650 * 86400)))
        case .assetsKeepPreviousForSec: ConfigKey("Assets", "KeepPreviousForSec", "259200", doc: "How long the version an update replaced is kept for `earshotctl rollback` (3 days); the store budget may remove it sooner. 0: retire it as soon as no session uses it.", validate: ConfigValidation.seconds(in: 0...(3650 * 86400)))
        case .assetsMaxStoreSize: ConfigKey("Assets", "MaxStoreSize", "0", doc: "Budget for installed assets in bytes; above it the least recently used unneeded assets are removed. 0: no budget.", validate: ConfigValidation.integer(in: 0...Int.max))
        case .assetsGCIntervalSec: ConfigKey("Assets", "GCIntervalSec", "3600", doc: "Seconds between automatic garbage collection runs.", validate: ConfigValidation.seconds(in: 1...(30 * 86400)))
        case .assetsUpdateIntervalSec: ConfigKey("Assets", "UpdateIntervalSec", "auto", doc: "Seconds between the daemon's own unattended updates (catalog refresh, then newer versions of installed assets, as `earshotctl update`), the first at start; logged as by schedule. auto: daily in user mode, which has no update timer; never in system mode, where earshot-update.timer runs them. 0: never.", validate: { $0 == "auto" ? nil : ConfigValidation.seconds(in: 0...(30 * 86400))($0) })
        case .assetsUpdateBandwidthLimit: ConfigKey("Assets", "UpdateBandwidthLimit", "0", doc: "Bytes per second for unattended update downloads. 0: unlimited.", validate: ConfigValidation.integer(in: 0...Int.max))
        case .downloadConnectTimeoutSec: ConfigKey("Download", "ConnectTimeoutSec", "15", doc: "Connection timeout per attempt.", validate: ConfigValidation.seconds(in: 1...600))
        case .downloadLowSpeedLimit: ConfigKey("Download", "LowSpeedLimit", "1024", doc: "A transfer slower than this many bytes per second for LowSpeedTimeSec is treated as stalled and retried.", validate: ConfigValidation.integer(in: 1...Int.max))
        case .downloadLowSpeedTimeSec: ConfigKey("Download", "LowSpeedTimeSec", "30", doc: "See LowSpeedLimit.", validate: ConfigValidation.seconds(in: 1...3600))
        case .downloadMaxAttemptsPerMirror: ConfigKey("Download", "MaxAttemptsPerMirror", "3", doc: "Attempts per mirror (with exponential backoff) before failing over to the next.", validate: ConfigValidation.integer(in: 1...20))
        case .downloadCAFile: ConfigKey("Download", "CAFile", "", doc: "Extra CA bundle for HTTPS sources and registries (PEM). Empty: the system's.", validate: ConfigValidation.absolutePathOrEmpty)
        case .registryAuthFile: ConfigKey("Registry", "AuthFile", "", doc: "Credentials for oci:// catalog sources and earshotctl publish, in the auths format of ~/.docker/config.json. It must be owned by root (or the daemon's user) and readable by its owner only; otherwise it is not read, and a registry that asks for credentials fails with an error saying why. Its contents never appear in logs or in earshotctl config. Empty: anonymous.", validate: ConfigValidation.absolutePathOrEmpty)
        case .registryPlainHTTPHosts: ConfigKey("Registry", "PlainHTTPHosts", "", repeatable: true, doc: "Registries (HOST or HOST:PORT) that may be reached over plain HTTP, besides loopback: they are asked over HTTPS first and used over plain HTTP if they do not speak TLS (a failed certificate check is an error, never a reason to drop TLS). Every other registry and token service needs HTTPS. Repeatable.", validate: { $0.isEmpty || !$0.contains("/") ? nil : "expected HOST or HOST:PORT" })
        case .wyomingListen: ConfigKey("Wyoming", "Listen", "", doc: "Also serve Wyoming ASR over TCP (as Home Assistant connects), e.g. tcp://127.0.0.1:10300. TCP peers have no kernel identity: they act as User/AppID below, never as admins, and only Wyoming events are served. A non-loopback address is logged as a warning. Empty: off.", validate: ConfigValidation.tcpEndpointOrEmpty)
        case .wyomingUser: ConfigKey("Wyoming", "User", "nobody", doc: "The user TCP Wyoming peers act as: their reservations and per-user limits are this user's.", validate: ConfigValidation.user)
        case .wyomingAppID: ConfigKey("Wyoming", "AppID", "wyoming-tcp", doc: "The app id TCP Wyoming peers act as (reservations are kept per app).", validate: { DaemonHarness.isValidAppID($0) ? nil : "expected letters, digits, '.', '_' or '-'" })
        case .wyomingZeroconf: ConfigKey("Wyoming", "Zeroconf", "no", doc: "yes: announce the TCP listener as _wyoming._tcp through avahi (as Home Assistant discovers Wyoming services). Needs a non-loopback Listen; when avahi-daemon is not running a warning is logged, serving goes on and the service is announced once avahi starts.", validate: ConfigValidation.oneOf(["yes", "no"]))
        case .httpSocket: ConfigKey("HTTP", "Socket", "", doc: "Unix socket of the HTTP front (OpenAI-compatible audio API, Docs/HTTP.md), with the main socket's SocketMode; clients are identified by peer credentials. Empty: http.sock beside the main socket. off: no HTTP front.", validate: { $0 == "off" ? nil : ConfigValidation.absolutePathOrEmpty($0) })
        case .httpListen: ConfigKey("HTTP", "Listen", "", doc: "Also serve the HTTP front on TCP HOST:PORT (numeric host, e.g. 127.0.0.1:8000). TCP has no peer credentials: requests need a key from KeyFile unless AllowAnonymous. Empty: off.", validate: ConfigValidation.tcpEndpointOrEmpty)
        case .httpKeyFile: ConfigKey("HTTP", "KeyFile", "", doc: "API keys for TCP clients, one 'KEY APP-ID' per line (# comments; keys of at least 16 characters); the key's app holds the request's reservations. Keep it readable by the daemon only.", validate: ConfigValidation.absolutePathOrEmpty)
        case .httpAllowAnonymous: ConfigKey("HTTP", "AllowAnonymous", "no", doc: "Serve TCP requests without a key (as app http-anonymous). Anyone who reaches the port can then transcribe and read /metrics.", validate: ConfigValidation.oneOf(["yes", "no"]))
        case .httpTCPMetrics: ConfigKey("HTTP", "TCPMetrics", "key", doc: "Who may read /metrics over TCP: key (a key from KeyFile; never anonymously, even with AllowAnonymous), open (anyone who reaches the port, e.g. a scraper without credentials), off (never over TCP; scrape the Unix socket).", validate: ConfigValidation.oneOf(["key", "open", "off"]))
        case .httpUser: ConfigKey("HTTP", "User", "nobody", doc: "The user TCP requests act as: their reservations and per-user limits are this user's.", validate: ConfigValidation.user)
        case .httpMaxBodyMiB: ConfigKey("HTTP", "MaxBodyMiB", "25", doc: "Largest request body (an uploaded file) in MiB; larger ones get 413 without being buffered.", validate: ConfigValidation.integer(in: 1...1024))
        case .httpMaxConnections: ConfigKey("HTTP", "MaxConnections", "64", doc: "HTTP connections served at once (one thread each). A sixteenth of them (at least one) is kept for admins; more connections are refused at once with 503 and Retry-After, never left in the listen backlog.", validate: ConfigValidation.integer(in: 1...1024))
        case .httpMaxConnectionsPerPeer: ConfigKey("HTTP", "MaxConnectionsPerPeer", "8", doc: "Most HTTP connections one non-admin uid (Unix socket) or one address (TCP) may hold; more are refused at once with 429 and Retry-After, so one user or host cannot take the front from the others. TCP peers together may hold the whole non-admin share.", validate: ConfigValidation.integer(in: 1...1024))
        case .httpIdleTimeoutSec: ConfigKey("HTTP", "IdleTimeoutSec", "30", doc: "An HTTP connection that sends or reads nothing for this long is closed.", validate: ConfigValidation.integer(in: 1...3600))
        case .httpHeaderTimeoutSec: ConfigKey("HTTP", "HeaderTimeoutSec", "10", doc: "A request's headers must be complete within this many seconds of the connection (or the previous response); a trickle of bytes does not extend it.", validate: ConfigValidation.seconds(in: 1...3600))
        case .httpMinUploadBytesPerSec: ConfigKey("HTTP", "MinUploadBytesPerSec", "4096", doc: "Least body rate: an upload slower than this over any UploadRateWindowSec is cut (a byte now and then does not reset it).", validate: ConfigValidation.integer(in: 1...(1 << 30)))
        case .httpUploadRateWindowSec: ConfigKey("HTTP", "UploadRateWindowSec", "10", doc: "The window over which MinUploadBytesPerSec is measured.", validate: ConfigValidation.seconds(in: 1...3600))
        case .httpMaxUploadSec: ConfigKey("HTTP", "MaxUploadSec", "600", doc: "Longest a whole request body may take to arrive, whatever its rate.", validate: ConfigValidation.seconds(in: 1...86400))
        }
    }
}

/// The registry of keys (``Setting``'s definitions, in order): `Config/earshotd.conf` lists the
/// same keys commented out; a test keeps the two in step.
public enum ConfigRegistry {
    public static let keys: [ConfigKey] = Setting.allCases.map(\.key)

    /// The shipped `Config/earshotd.conf`: every key commented out at its default, with its doc.
    /// (`earshotd --config-template` prints it; a test keeps the shipped file identical.)
    public static var template: String {
        var lines = [
            "# earshotd configuration (systemd-style INI).",
            "#",
            "# System daemon: /etc/earshot/earshotd.conf; user daemon (earshotd --user):",
            "# $XDG_CONFIG_HOME/earshot/earshotd.conf. Drop-ins: earshotd.conf.d/*.conf next to this file,",
            "# read in lexical order after it; later assignments win, repeatable keys accumulate and an",
            "# empty assignment clears them. `earshotctl config` shows every key with its default, effective",
            "# value and the file:line it came from. An unknown key or a bad value is logged with its",
            "# file:line and the previous value is kept, except for SocketMode: a bad value there stops the",
            "# daemon from starting.",
            "#",
            "# Every key is listed here, commented out, at its default. Generated by",
            "# `earshotd --config-template` from the daemon's key registry.",
        ]
        var section = ""
        for key in keys {
            if key.section != section {
                section = key.section
                lines += ["", "[\(section)]"]
            } else {
                lines.append("")
            }
            lines += wrap(key.doc, width: 98).map { "# " + $0 }
            let defaults = key.repeatable ? key.defaultValue.split(separator: " ").map(String.init) : [key.defaultValue]
            lines += (defaults.isEmpty ? [""] : defaults).map { "#\(key.name)=\($0)" }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    private static func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if !line.isEmpty, line.count + 1 + word.count > width {
                lines.append(line)
                line = ""
            }
            line += (line.isEmpty ? "" : " ") + word
        }
        if !line.isEmpty { lines.append(line) }
        return lines
    }

    /// The key `Section.Name`, if registered.
    public static func key(_ id: String) -> ConfigKey? {
        keys.first { $0.id.caseInsensitiveCompare(id) == .orderedSame }
    }
}
