import EarshotAudio
import EarshotSystem
import EarshotWire

/// Analyzer input read a chunk at a time by blocking reads (file decoding, a pipe) on dedicated
/// threads, converted to the analyzer's format. Each iteration opens its source anew.
public struct AnalyzerInputSequence: AsyncSequence, Sendable {
    public typealias Element = AnalyzerInput
    public typealias Failure = any Error
    /// Opens the source; the returned reader gives the next inputs (possibly none), nil at the end.
    let open: @Sendable () throws -> () throws -> [AnalyzerInput]?
    /// A live source's stop (a capture session): the sequence ends at most ``stopGrace`` after it
    /// even when a read is still waiting for audio the source no longer delivers.
    var stop: AVCaptureSession?
    /// How long a read under way at the stop may still finish (its audio is kept): 0.5 s, five
    /// times a capture read.
    static let stopGrace: Duration = .milliseconds(500)

    init(stop: AVCaptureSession? = nil, open: @escaping @Sendable () throws -> () throws -> [AnalyzerInput]?) {
        self.stop = stop
        self.open = open
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        public typealias Element = AnalyzerInput
        public typealias Failure = any Error
        let reader: ChunkReader
        let stop: AVCaptureSession?
        var pending: [AnalyzerInput] = []

        public mutating func next() async throws -> AnalyzerInput? {
            let reader = reader
            while pending.isEmpty {
                let read: @Sendable () async throws -> [AnalyzerInput]? = { try await BlockingWork.run("earshot.audio-input", { try reader.next() }) }
                let next = if let stop { try await Self.read(read, orEndAfter: stop) } else { try await read() }
                guard let inputs = next else { return nil }
                pending = inputs
            }
            return pending.removeFirst()
        }

        /// `read`'s inputs, or nil once `stop` has stopped for ``AnalyzerInputSequence/stopGrace``
        /// with the read still waiting (it is left to end on its own thread; its audio is dropped).
        static func read(_ read: @escaping @Sendable () async throws -> [AnalyzerInput]?, orEndAfter stop: AVCaptureSession) async throws -> [AnalyzerInput]? {
            let first = FirstOutcome<[AnalyzerInput]?>()
            return try await withCheckedThrowingContinuation { continuation in
                first.set(continuation)
                Task {
                    do { first.resume(with: .success(try await read())) } catch { first.resume(with: .failure(error)) }
                }
                stop.whenStopped {
                    Task {
                        try? await Task.sleep(for: AnalyzerInputSequence.stopGrace)
                        first.resume(with: .success(nil))
                    }
                }
            }
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(reader: ChunkReader(open: open), stop: stop) }

    /// The audio of `file` (opened by `open` on the reading thread), two seconds at a time,
    /// converted to `analyzerFormat`, the converter's tail included.
    static func file(analyzerFormat: AVAudioFormat, _ open: @escaping @Sendable () throws -> AVAudioFile) -> AnalyzerInputSequence {
        AnalyzerInputSequence {
            let file = try open()
            let converter = AnalyzerInputConverter(analyzerFormat: analyzerFormat)
            var done = false
            return {
                guard !done else { return nil }
                let samples = try file.readSamples(frames: Int(file.fileFormat.sampleRate) * 2)
                if samples.isEmpty {
                    done = true
                    return try converter.flush()
                }
                return try converter.convert(samples, format: file.fileFormat, at: nil)
            }
        }
    }
}

/// Resumes a continuation with the first outcome given, once; the later ones are dropped.
final class FirstOutcome<Value: Sendable>: @unchecked Sendable {
    // Unchecked: state is guarded by `lock`.
    private let lock = NSLock()
    private var continuation: CheckedContinuation<Value, any Error>?
    private var early: Result<Value, any Error>?
    private var done = false

    func set(_ continuation: CheckedContinuation<Value, any Error>) {
        let ready: Result<Value, any Error>? = lock.withLock {
            if let early { return early }
            self.continuation = continuation
            return nil
        }
        if let ready { continuation.resume(with: ready) }
    }

    func resume(with outcome: Result<Value, any Error>) {
        let waiting: CheckedContinuation<Value, any Error>? = lock.withLock {
            guard !done else { return nil }
            done = true
            if continuation == nil { early = outcome }
            defer { continuation = nil }
            return continuation
        }
        waiting?.resume(with: outcome)
    }
}

/// The reader of one iteration: used by one iterator, on one thread at a time.
final class ChunkReader: @unchecked Sendable {
    private let open: @Sendable () throws -> () throws -> [AnalyzerInput]?
    private var read: (() throws -> [AnalyzerInput]?)?

    init(open: @escaping @Sendable () throws -> () throws -> [AnalyzerInput]?) { self.open = open }

    func next() throws -> [AnalyzerInput]? {
        if read == nil { read = try open() }
        return try read?()
    }
}

/// Analyzer input from an audio file or asset (Apple's `AssetInputSequenceProvider`): decoded by
/// libsndfile and converted to the analyzer's format on dedicated threads, the tail kept.
public final class AssetInputSequenceProvider: Sendable {
    /// The asset's audio as analyzer input; ends after the last sample.
    public let analyzerInputs: AnalyzerInputSequence

    /// Reads `track` of `asset` in `analyzerFormat`. The file is opened when iteration starts;
    /// errors (an unreadable file) are thrown from the sequence. `priority` is accepted for source
    /// compatibility: reading runs on its own threads.
    public init(asset: AVAsset, track: AVAssetTrack, analyzerFormat: AVAudioFormat, priority: TaskPriority? = nil) {
        let source = asset.source
        analyzerInputs = .file(analyzerFormat: analyzerFormat) { try AVAudioFile(forReading: source) }
    }

    /// Reads the first audio track of `asset` in the best format for `modules`; throws
    /// ``EarshotError/noCompatibleAudioFormat`` when their assets are not installed and
    /// ``AudioError`` when the asset cannot be read.
    public static func provider(from asset: AVAsset, compatibleWith modules: [any SpeechModule], priority: TaskPriority? = nil) async throws -> AssetInputSequenceProvider {
        try await provider(from: asset, track: firstAudioTrack(of: asset), compatibleWith: modules, priority: priority)
    }

    /// Earshot extension: reads the first audio track of `asset` in `analyzerFormat` without asking
    /// the daemon (for a client that knows the modules are installed; see ``SpeechAnalyzer/analyzerFormat``).
    public static func provider(from asset: AVAsset, analyzerFormat: AVAudioFormat) async throws -> AssetInputSequenceProvider {
        AssetInputSequenceProvider(asset: asset, track: try await firstAudioTrack(of: asset), analyzerFormat: analyzerFormat)
    }

    private static func firstAudioTrack(of asset: AVAsset) async throws -> AVAssetTrack {
        guard let track = try await asset.loadTracks(withMediaType: .audio).first else {
            throw AudioError.unreadable(path: asset.source.path, reason: "no audio track")
        }
        return track
    }

    /// Reads `track` of `asset` in the best format for `modules`.
    public static func provider(from asset: AVAsset, track: AVAssetTrack, compatibleWith modules: [any SpeechModule], priority: TaskPriority? = nil) async throws -> AssetInputSequenceProvider {
        guard let format = await SpeechAnalyzer.bestAvailableAudioFormat(compatibleWith: modules, considering: track.naturalFormat) else {
            throw EarshotError.noCompatibleAudioFormat
        }
        return AssetInputSequenceProvider(asset: asset, track: track, analyzerFormat: format)
    }
}

/// Analyzer input from raw little-endian integer PCM on a file descriptor (a pipe, stdin), read
/// as it arrives — at most 0.1 s per read — and converted to the analyzer's format. Earshot
/// extension (what `earshot transcribe --live` reads).
public final class RawPCMInputSequenceProvider: Sendable {
    public let analyzerInputs: AnalyzerInputSequence

    /// `rate`, `channels` and 16-bit samples must lie within ``AudioLimits``, else ``AudioError``.
    public init(fileDescriptor fd: Int32, sampleRate rate: Int, channels: Int, analyzerFormat: AVAudioFormat) throws(AudioError) {
        try AudioLimits.check(rate: rate, channels: channels, width: 2, what: "raw PCM input")
        // AudioLimits holds only formats that exist.
        let format = AVAudioFormat(commonFormat: .pcmFormatInt16, sampleRate: Double(rate), channels: AVAudioChannelCount(channels), interleaved: true)!
        analyzerInputs = AnalyzerInputSequence {
            let converter = AnalyzerInputConverter(analyzerFormat: analyzerFormat)
            var done = false
            return {
                guard !done else { return nil }
                let frameBytes = 2 * channels
                var bytes = [UInt8](repeating: 0, count: rate / 10 * frameBytes)
                let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
                if n <= 0 {
                    done = true
                    return try converter.flush()
                }
                let samples = try PCM.floats(fromLittleEndian: bytes[0..<(n - n % frameBytes)], width: 2)
                return try converter.convert(samples, format: format, at: nil)
            }
        }
    }
}

/// Analyzer input from a microphone (Apple's `CaptureInputSequenceProvider`): the device's
/// sound-server source (PulseAudio, or PipeWire through its PulseAudio interface) recorded in the
/// analyzer's format — the server converts — a tenth of a second at a time on dedicated threads.
/// The sequence ends once the session's `stopRunning()` is called, after the audio recorded so far
/// (at most half a second later, even when the source stopped delivering audio).
public final class CaptureInputSequenceProvider: Sendable {
    /// The session; `stopRunning()` ends ``analyzerInputs``.
    public let captureSession: AVCaptureSession
    /// Present for source compatibility: the provider records the device itself.
    public let captureAudioDataOutput = AVCaptureAudioDataOutput()
    public let analyzerInputs: AnalyzerInputSequence

    /// Earshot extension: records `device` into `session` in `analyzerFormat`, for a client that
    /// already knows the format (``SpeechAnalyzer/analyzerFormat``): no daemon query, unlike
    /// ``provider(from:in:compatibleWith:priority:)``.
    public init(device: AVCaptureDevice, session: AVCaptureSession, analyzerFormat: AVAudioFormat) {
        captureSession = session
        let application = EarshotService.defaultAppID
        analyzerInputs = AnalyzerInputSequence(stop: session) {
            let recorder = try SoundServerRecorder(device: device, format: analyzerFormat, application: application)
            let frames = max(1, Int(analyzerFormat.sampleRate) / 10)
            return {
                guard !session.isStopped else { return nil }
                return [AnalyzerInput(format: analyzerFormat, samples: try recorder.read(frames: frames), bufferStartTime: nil)]
            }
        }
    }

    /// Records the default source into `session` in `analyzerFormat`.
    public convenience init(session: AVCaptureSession, analyzerFormat: AVAudioFormat, priority: TaskPriority?) throws {
        // The default audio device always exists; the server is reached when recording starts.
        self.init(device: AVCaptureDevice.default(for: .audio)!, session: session, analyzerFormat: analyzerFormat)
    }

    /// Records `captureDevice` in a new, running session in the best format for `modules`.
    public static func providerWithSession(from captureDevice: AVCaptureDevice, compatibleWith modules: [any SpeechModule], priority: TaskPriority? = nil) async throws -> CaptureInputSequenceProvider {
        let session = AVCaptureSession()
        session.startRunning()
        return try await provider(from: captureDevice, in: session, compatibleWith: modules, priority: priority)
    }

    /// Records `captureDevice` into `session` in the best format for `modules`; throws
    /// ``EarshotError/noCompatibleAudioFormat`` when their assets are not installed.
    public static func provider(from captureDevice: AVCaptureDevice, in session: AVCaptureSession, compatibleWith modules: [any SpeechModule], priority: TaskPriority? = nil) async throws -> CaptureInputSequenceProvider {
        guard let format = await SpeechAnalyzer.bestAvailableAudioFormat(compatibleWith: modules) else { throw EarshotError.noCompatibleAudioFormat }
        return CaptureInputSequenceProvider(device: captureDevice, session: session, analyzerFormat: format)
    }
}
