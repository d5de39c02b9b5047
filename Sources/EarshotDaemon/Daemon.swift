import Dispatch
import EarshotAssets
import EarshotAudio
import EarshotHTTP
import EarshotSpeech
import EarshotSystem
import EarshotWire
import Foundation

/// What `earshotd`'s command line asks for.
public struct DaemonOptions: Sendable {
    public var socket: String?
    public var stateDirectory: String?
    public var cacheDirectory: String?
    public var configFile: String?
    public var userMode = false
    /// `--catalog` URLs, replacing `[Catalog] URL=` when given.
    public var catalogURLs: [String] = []
    /// `--keys-dir` directories, replacing `[Catalog] KeysDirectory=` when given.
    public var keyDirectories: [String] = []
    public init() {}
}

/// The daemon: loads config, listens, serves connections, and shuts down gracefully on SIGTERM.
public struct Daemon: Sendable {
    public let options: DaemonOptions
    let environment: [String: String]

    public init(options: DaemonOptions, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.options = options
        self.environment = environment
    }

    /// Every C library linked into the daemon, with its run-time version.
    public static var linkedLibraries: [LinkedLibrary] {
        AssetsLibraries.linked + [Systemd.linkedLibrary, ZeroconfAnnouncer.linkedLibrary] + AudioLibraries.linked + SpeechLibraries.linked
    }

    /// Runs until SIGTERM/SIGINT; returns the process exit code.
    public func run() async -> Int32 {
        let mode: DaemonPaths.Mode = options.userMode ? .user : .system
        let configFile = options.configFile ?? DaemonPaths.defaultConfigFile(mode: mode, environment: environment)
        var config = DaemonConfig.load(path: configFile)
        if !options.catalogURLs.isEmpty { config.override(.catalogURL, values: options.catalogURLs, source: "command line") }
        if !options.keyDirectories.isEmpty { config.override(.catalogKeysDirectory, values: options.keyDirectories, source: "command line") }
        let logger = Logger(minimum: LogLevel(rawValue: config[.daemonLogLevel]) ?? .info, environment: environment)
        defer { logger.flush() }
        for warning in config.warnings { logger.warning("config: \(warning)") }
        guard config.errors.isEmpty else {
            for error in config.errors { logger.error("config: \(error); refusing to start") }
            return 1
        }

        let paths = DaemonPaths.resolve(mode: mode, socketFlag: options.socket, stateFlag: options.stateDirectory,
                                        cacheFlag: options.cacheDirectory, config: config, environment: environment)
        for directory in [paths.stateDirectory, paths.cacheDirectory] {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                logger.error("cannot create \(directory): \(error.localizedDescription)")
                return 1
            }
        }

        // One clock for every timer loop (GC, download backoff, progress, model lingering).
        let clock = SystemServiceClock()
        let metrics = DaemonMetrics()
        let assets: AssetService
        do {
            assets = try AssetService(settings: assetSettings(config, paths), clock: clock, observer: metrics, log: { logger.log(LogLevel(rawValue: $0.priority.rawValue) ?? .info, "assets: \($0.message)", $0.fields) })
            try await assets.start()
        } catch {
            logger.error("cannot open the asset store in \(paths.stateDirectory): \(error)")
            return 1
        }

        signal(SIGPIPE, SIG_IGN)
        let signals = SignalWatcher(signals: [SIGTERM, SIGINT])
        let systemd = Systemd()
        let listener: Listener
        do {
            // The user daemon's default socket lives in directories that must be the user's own.
            let directory: Listener.Directory = mode == .user && paths.socket == SocketLocations.user(environment: environment)
                ? .userRuntime(environment: environment) : .create(permissions: options.userMode ? 0o700 : 0o755)
            listener = try Listener.open(path: paths.socket, mode: mode_t(Int(config[.daemonSocketMode], radix: 8)!), directory: directory, systemd: systemd)
        } catch {
            logger.error("cannot listen: \(error)")
            return 1
        }

        let limits = DaemonLimits(frame: config.frameLimits, maxConnections: config.int(.limitsMaxConnections))
        let registry = ConnectionRegistry(limits: ConnectionLimits(
            maxConnections: limits.maxConnections, maxPerUser: config.int(.limitsMaxConnectionsPerUser),
            adminReserved: config.int(.limitsAdminReservedConnections), maxPerAddress: config.int(.limitsMaxConnectionsPerAddress)))
        let refusals = RefusalLog(logger: logger, clock: clock)
        let facts = DaemonFacts(config: config, paths: paths, socketPath: listener.path, socketActivated: listener.activated,
                                started: .now, limits: limits)
        let speech = SpeechService(settings: SpeechSettings(
            maxConcurrentAnalyses: config.int(.analysisMaxConcurrentAnalyses), maxConcurrentAnalysesHard: config.int(.analysisMaxConcurrentAnalysesHard),
            lingerSeconds: config.seconds(.analysisLingerSeconds), maxKeepAliveSeconds: config.seconds(.analysisMaxKeepAliveSec),
            inferenceThreads: config.int(.analysisInferenceThreads), batchThreads: config.int(.analysisBatchThreads),
            recordingWindowSeconds: config.seconds(.analysisRecordingWindowSec),
            speculativeDecode: config.flag(.analysisSpeculativeDecode), maxQueued: config.int(.analysisMaxQueued),
            maxModelMemoryBytes: config.int(.analysisMaxModelMemoryMiB) > 0 ? config.int(.analysisMaxModelMemoryMiB) << 20 : Int(ProcessInfo.processInfo.physicalMemory / 2),
            beamSize: config.int(.analysisBeamSize), conditionOnPreviousText: config.flag(.analysisConditionOnPreviousText)),
            clock: clock, observer: SpeechReports(metrics: metrics, logger: logger))
        EngineProcess.shared.observe { event in
            switch event {
            case .started(let pid): logger.info("engine process \(pid) started (\(EngineProcess.shared.executable))")
            case .ended(let pid, let reason, false): logger.info("engine process \(pid) ended with the last model: \(reason)")
            case .ended(let pid, let reason, true): logger.warning("engine process \(pid) ended unexpectedly, its sessions fail: \(reason)")
            }
        }
        let errors = ErrorMap(logger: logger, metrics: metrics)
        let coordinator = AnalysisCoordinator(speech: speech, assets: assets, metrics: metrics)
        let admins = AdminPolicy(group: config[.daemonAdminGroup], daemonUID: getuid())
        let harness = DaemonHarness(facts: facts, registry: registry, assets: AssetHarness(assets: assets),
                                    speech: SpeechHarness(speech: speech, coordinator: coordinator, errors: errors, logger: logger), errors: errors)
        let server = ConnectionServer(harness: harness, registry: registry, logger: logger, channelOptions: config.channelOptions, refusals: refusals, clock: clock)
        let http: [HTTPListener]
        do {
            http = try await openHTTP(config, paths: paths, mainSocket: listener.path, harness: harness, admins: admins, metrics: metrics, refusals: refusals, clock: clock)
        } catch {
            logger.error("cannot serve HTTP: \(error)")
            listener.stop()
            return 1
        }
        let wyomingTCP: Listener?
        do {
            wyomingTCP = try openWyomingTCP(config, logger: logger)
        } catch {
            logger.error("cannot serve Wyoming over TCP on \(config[.wyomingListen]): \(error)")
            listener.stop()
            for front in http { await front.stop() }
            return 1
        }
        let zeroconf = await announceWyoming(config, listener: wyomingTCP, logger: logger)

        // Dependency order: each service may use those before it; shutdown asks the last first.
        var services: [any DaemonService] = [
            assets,
            BackgroundLoop(name: "model evictor") { await speech.runEvictor() }, // lingering models unload when their time is up
            coordinator,
        ]
        if !http.isEmpty { services.append(HTTPFrontService(listeners: http, coordinator: coordinator)) }
        if let zeroconf { services.append(ZeroconfService(announcer: zeroconf)) }
        if let wyomingTCP {
            let peers = wyomingTCP.connections(authorize: { _ in false }, onError: { logger.warning("accept failed: \($0)") })
            services.append(FrameFrontService(name: "Wyoming TCP front", listener: wyomingTCP, accepted: peers, server: server,
                                              networkAppID: config[.wyomingAppID], registry: registry, coordinator: coordinator))
        }
        let accepted = listener.connections(authorize: { peer in admins.isAdmin(peer) }, onError: { logger.warning("accept failed: \($0)") })
        services.append(FrameFrontService(name: "socket front", listener: listener, accepted: accepted, server: server,
                                          registry: registry, coordinator: coordinator))

        let where_ = listener.path ?? "fd \(listener.fd)"
        logger.notice("earshotd \(EarshotVersion.string) listening on \(where_)\(listener.activated ? " (socket activation)" : "")",
                      ["mode": mode.rawValue, "state_dir": paths.stateDirectory, "cache_dir": paths.cacheDirectory, "config": config.files.joined(separator: ","),
                       "http": http.isEmpty ? "off" : http.map(\.endpoint).joined(separator: ","),
                       "watchdog": systemd.watchdogInterval.map { "every \(Int($0 / .milliseconds(2))) ms" } ?? "off"])
        logger.flush() // the start line is written before systemd hears READY
        systemd.notify("READY=1\nSTATUS=Listening on \(where_)\nMAINPID=\(getpid())")

        var group = ServiceGroup(services: services, clock: clock, shutdownTimeout: .seconds(config.seconds(.daemonShutdownTimeoutSec)),
                                 nextSignal: { await signals.next() }, log: { logger.log($0, $1) })
        group.onShutdown = { reason in systemd.notify("STOPPING=1\nSTATUS=Shutting down (\(reason))") }
        if let interval = systemd.watchdogInterval {
            group.heartbeat = (interval / 2, {
                _ = await registry.count // proves the daemon's actors still answer
                systemd.notify("WATCHDOG=1")
            })
        }
        let outcome = await group.run()
        signals.stop()
        logger.notice("earshotd stopped", ["reason": outcome.reason])
        logger.flush()
        systemd.flush()
        return outcome.exitCode
    }

    /// The Wyoming TCP listener (`[Wyoming] Listen`), or nil when it is off.
    func openWyomingTCP(_ config: DaemonConfig, logger: Logger) throws -> Listener? {
        guard let endpoint = TCPSocket.endpoint(config[.wyomingListen]) else { return nil }
        let uid = ConfigValidation.uid(ofUser: config[.wyomingUser]) ?? 65534
        let listener = try Listener.tcp(host: endpoint.host, port: endpoint.port, identity: .networkUser(uid))
        let fields = ["wyoming_listen": "\(endpoint.host):\(listener.port ?? endpoint.port)", "wyoming_uid": "\(uid)"]
        if TCPSocket.isLoopback(endpoint.host) {
            logger.notice("serving Wyoming over TCP on \(endpoint.host):\(listener.port ?? endpoint.port)", fields)
        } else {
            logger.warning("serving Wyoming over TCP on non-loopback \(endpoint.host):\(listener.port ?? endpoint.port): anyone who reaches it can transcribe as uid \(uid)", fields)
        }
        return listener
    }

    /// The zeroconf announcement of the Wyoming TCP listener when `[Wyoming] Zeroconf=yes`
    /// (avahi's client connects over D-Bus: off the cooperative pool).
    func announceWyoming(_ config: DaemonConfig, listener: Listener?, logger: Logger) async -> ZeroconfAnnouncer? {
        guard config.flag(.wyomingZeroconf) else { return nil }
        guard let listener, let endpoint = TCPSocket.endpoint(config[.wyomingListen]), let port = listener.port else {
            logger.warning("zeroconf: not announcing _wyoming._tcp: [Wyoming] Listen is off")
            return nil
        }
        return await BlockingWork.run("earshot.zeroconf") { ZeroconfAnnouncer.wyoming(host: endpoint.host, port: port, logger: logger) }
    }

    /// The HTTP front's listeners: its Unix socket (`[HTTP] Socket`; beside the main one by
    /// default, unless `off`) and TCP (`[HTTP] Listen`, off by default).
    func openHTTP(_ config: DaemonConfig, paths: DaemonPaths, mainSocket: String?, harness: DaemonHarness, admins: AdminPolicy,
                  metrics: DaemonMetrics, refusals: RefusalLog, clock: any ServiceClock) async throws -> [HTTPListener] {
        let scratch = paths.cacheDirectory + "/http-uploads"
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let pace = HTTPPace(headerTimeout: .seconds(config.seconds(.httpHeaderTimeoutSec)),
                            minimumBodyBytesPerSecond: config.int(.httpMinUploadBytesPerSec),
                            rateWindow: .seconds(config.seconds(.httpUploadRateWindowSec)), maximumUpload: .seconds(config.seconds(.httpMaxUploadSec)))
        let maxConnections = config.int(.httpMaxConnections)
        let limits = HTTPLimits(maxBodyBytes: config.int(.httpMaxBodyMiB) << 20, maxConnections: maxConnections,
                                idleTimeoutSeconds: config.int(.httpIdleTimeoutSec), pace: pace)
        // Per uid (Unix socket) and per address (TCP, within the network user's share of the
        // front); 1/16 of the front for admins, so one can always scrape /metrics.
        let reserved = max(1, maxConnections / 16)
        let slots = ConnectionLimits(maxConnections: maxConnections, maxPerUser: config.int(.httpMaxConnectionsPerPeer), adminReserved: reserved,
                                     maxPerAddress: config.int(.httpMaxConnectionsPerPeer), maxNetworkUser: maxConnections - reserved)
        var network = HTTPNetworkAccess()
        network.user = .networkUser(ConfigValidation.uid(ofUser: config[.httpUser]) ?? 65534)
        network.anonymousApp = config.flag(.httpAllowAnonymous) ? "http-anonymous" : nil
        network.metrics = HTTPNetworkAccess.MetricsAccess(rawValue: config[.httpTCPMetrics]) ?? .key
        if !config[.httpKeyFile].isEmpty { network.keys = try HTTPNetworkAccess.keys(fromFile: config[.httpKeyFile]) }
        let front = try HTTPFront(harness: harness, admins: admins, metrics: metrics, network: network, scratch: scratch,
                              admission: HTTPAdmission(limits: slots), refusals: refusals)
        var listeners: [HTTPListener] = []
        let configured = config[.httpSocket]
        if configured != "off" {
            let path = configured.isEmpty ? ((mainSocket ?? paths.socket) as NSString).deletingLastPathComponent + "/http.sock" : configured
            listeners.append(try HTTPListener(path: path, mode: mode_t(Int(config[.daemonSocketMode], radix: 8)!), limits: limits, clock: clock, handler: front))
        }
        if let endpoint = TCPSocket.endpoint(config[.httpListen]) {
            do {
                listeners.append(try HTTPListener(host: endpoint.host, port: endpoint.port, limits: limits, clock: clock, handler: front))
            } catch {
                for listener in listeners { await listener.stop() }
                throw error
            }
        }
        return listeners
    }

    /// The asset inventory's settings from the config.
    func assetSettings(_ config: DaemonConfig, _ paths: DaemonPaths) -> AssetSettings {
        var quotas: [String: Int] = [:]
        for entry in config.values(.assetsAppQuota) {
            let parts = entry.split(separator: "=", maxSplits: 1)
            quotas[String(parts[0])] = Int(parts[1])
        }
        var download = DownloadOptions()
        download.connectTimeout = .seconds(config.seconds(.downloadConnectTimeoutSec))
        download.lowSpeedLimit = config.int(.downloadLowSpeedLimit)
        download.lowSpeedTime = .seconds(config.seconds(.downloadLowSpeedTimeSec))
        download.maxAttemptsPerMirror = config.int(.downloadMaxAttemptsPerMirror)
        download.caFile = config[.downloadCAFile].isEmpty ? nil : config[.downloadCAFile]
        var settings = AssetSettings(
            stateDirectory: paths.stateDirectory, cacheDirectory: paths.cacheDirectory,
            catalogURLs: config.values(.catalogURL), keyDirectories: config.values(.catalogKeysDirectory),
            maxReservedLocales: config.int(.assetsMaxReservedLocales), maxReservedLocalesPerUser: config.int(.assetsMaxReservedLocalesPerUser),
            maxAppsPerUser: config.int(.assetsMaxAppsPerUser), appQuotas: quotas,
            reservationExpiry: config.seconds(.assetsReservationExpirySec), gcGracePeriod: config.seconds(.assetsGCGracePeriodSec),
            maxStoreSize: Int64(config.int(.assetsMaxStoreSize)), gcInterval: config.seconds(.assetsGCIntervalSec),
            download: download, updateBandwidthLimit: config.int(.assetsUpdateBandwidthLimit) > 0 ? Int64(config.int(.assetsUpdateBandwidthLimit)) : nil)
        settings.keepPreviousFor = config.seconds(.assetsKeepPreviousForSec)
        settings.registry = RegistrySettings(authFile: config[.registryAuthFile].isEmpty ? nil : config[.registryAuthFile],
                                             plainHTTPHosts: config.values(.registryPlainHTTPHosts).filter { !$0.isEmpty })
        settings.updateInterval = config[.assetsUpdateIntervalSec] == "auto"
            ? (paths.mode == .user ? 86400 : 0) : config.seconds(.assetsUpdateIntervalSec)
        if let pause = environment["EARSHOT_TEST_PAUSE"], let colon = pause.firstIndex(of: ":"),
           let phase = InstallPhase(rawValue: String(pause[..<colon])), let seconds = Double(pause[pause.index(after: colon)...]) {
            settings.testPause = (phase, seconds)
        }
        return settings
    }

}

/// Delivers SIGTERM/SIGINT through Dispatch sources instead of the default handlers.
/// (Unchecked: the sources are set up in init and only cancelled after.)
final class SignalWatcher: @unchecked Sendable {
    private let sources: [DispatchSourceSignal]
    private let stream: AsyncStream<Int32>
    private let continuation: AsyncStream<Int32>.Continuation

    init(signals: [Int32]) {
        (stream, continuation) = AsyncStream.makeStream(of: Int32.self)
        let queue = DispatchQueue(label: "earshot.signals")
        sources = signals.map { [continuation] number in
            Glibc.signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { continuation.yield(number) }
            source.resume()
            return source
        }
    }

    /// The next signal received (one waiter at a time); 0 once stopped.
    func next() async -> Int32 {
        var iterator = stream.makeAsyncIterator()
        return await iterator.next() ?? 0
    }

    func stop() {
        sources.forEach { $0.cancel() }
        continuation.finish()
    }
}
