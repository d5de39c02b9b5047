import CPulse
import EarshotAudio
import EarshotSystem
import Foundation

/// An audio input device (AVFoundation's `AVCaptureDevice`): a source of the sound server
/// (PulseAudio, or PipeWire through its PulseAudio interface).
public final class AVCaptureDevice: Sendable {
    /// The kinds of device (AVFoundation's `AVCaptureDevice.DeviceType`).
    public struct DeviceType: RawRepresentable, Hashable, Sendable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// A microphone: a sound-server source.
        public static let microphone = DeviceType(rawValue: "microphone")
    }

    /// Where a device sits (AVFoundation's `AVCaptureDevice.Position`); sources have none.
    public enum Position: Sendable { case unspecified, front, back }

    /// The source's name on the sound server (`pactl list sources short`); empty for the default.
    public let uniqueID: String
    public let localizedName: String
    /// Whether the source is a sink's monitor (what an output plays) rather than an input
    /// (Earshot extension; ``soundServerDevices()`` lists monitors, discovery does not).
    public let isMonitor: Bool
    /// Whether the source is the sound server's default one, as listed (Earshot extension).
    public let isSoundServerDefault: Bool

    /// The sound server's source named `uniqueID` (not checked until capture starts).
    public init?(uniqueID: String) {
        guard !uniqueID.isEmpty else { return nil }
        self.uniqueID = uniqueID
        localizedName = uniqueID
        isMonitor = false
        isSoundServerDefault = false
    }

    private init() {
        uniqueID = ""
        localizedName = "Default source"
        isMonitor = false
        isSoundServerDefault = true
    }

    private init(_ source: SoundServerSource) {
        uniqueID = source.name
        localizedName = source.description.isEmpty ? source.name : source.description
        isMonitor = source.isMonitor
        isSoundServerDefault = source.isDefault
    }

    /// Every source of the sound server (`$PULSE_SERVER`, else the default one), monitors
    /// included, in the server's order (Earshot extension). Throws ``AudioError`` when no server
    /// answers (within 5 s); never starts one.
    public static func soundServerDevices() async throws -> [AVCaptureDevice] {
        try await BlockingWork.run("earshot.sources") { () throws(AudioError) -> [AVCaptureDevice] in
            try SoundServerSources.list(application: ProcessInfo.processInfo.processName).map(AVCaptureDevice.init)
        }
    }

    /// Finds capture devices (AVFoundation's `AVCaptureDevice.DiscoverySession`): the sound
    /// server's input sources (not monitors) for `.microphone` and `.audio`.
    public final class DiscoverySession: Sendable {
        private let wantsMicrophones: Bool

        public init(deviceTypes: [DeviceType], mediaType: AVMediaType?, position: Position) {
            wantsMicrophones = deviceTypes.contains(.microphone) && (mediaType == nil || mediaType == .audio)
        }

        /// The devices found, asked of the server on each read (blocking for one round trip;
        /// from async code prefer ``AVCaptureDevice/soundServerDevices()``). Empty when no server
        /// answers, with the reason on standard error.
        public var devices: [AVCaptureDevice] {
            guard wantsMicrophones else { return [] }
            do {
                return try SoundServerSources.list(application: ProcessInfo.processInfo.processName).filter { !$0.isMonitor }.map(AVCaptureDevice.init)
            } catch {
                FileHandle.standardError.write(Data("Earshot: AVCaptureDevice.DiscoverySession: \(error)\n".utf8))
                return []
            }
        }
    }

    /// The sound server's default source (`$PULSE_SOURCE` when set) for `.audio`; nil for other media.
    public static func `default`(_ deviceType: DeviceType, for mediaType: AVMediaType?, position: Position) -> AVCaptureDevice? {
        mediaType == nil || mediaType == .audio ? AVCaptureDevice() : nil
    }

    /// The default audio source.
    public static func `default`(for mediaType: AVMediaType) -> AVCaptureDevice? {
        `default`(.microphone, for: mediaType, position: .unspecified)
    }
}

/// A capture session (AVFoundation's `AVCaptureSession`): one device recorded while running.
public final class AVCaptureSession: @unchecked Sendable {
    // Guards the state below.
    private let lock = NSLock()
    private var running = false
    private var stopped = false
    private var onStop: [@Sendable () -> Void] = []

    public init() {}

    /// Whether capture is running.
    public var isRunning: Bool { lock.withLock { running } }

    /// Starts capture (the provider's sequence then delivers audio).
    public func startRunning() { lock.withLock { running = true; stopped = false } }

    /// Stops capture: the provider's sequence ends after the audio already recorded.
    public func stopRunning() {
        let waiting = lock.withLock {
            running = false
            stopped = true
            defer { onStop = [] }
            return onStop
        }
        waiting.forEach { $0() }
    }

    /// Whether ``stopRunning()`` was called since the last start.
    package var isStopped: Bool { lock.withLock { stopped } }

    /// Runs `body` once ``stopRunning()`` is called (now, if it was).
    package func whenStopped(_ body: @escaping @Sendable () -> Void) {
        let now = lock.withLock {
            if stopped { return true }
            onStop.append(body)
            return false
        }
        if now { body() }
    }
}

/// Where captured audio goes (AVFoundation's `AVCaptureAudioDataOutput`); present for source
/// compatibility, the provider reads the device itself.
public final class AVCaptureAudioDataOutput: Sendable {
    public init() {}
}

/// A record stream from a sound-server source in one format (libpulse's simple API): blocking
/// reads of whole chunks. Use it on a dedicated thread.
package final class SoundServerRecorder {
    package let format: AVAudioFormat
    private let stream: OpaquePointer
    private let pa: earshot_pulse

    /// Connects to the sound server (`$PULSE_SERVER`, else the default) and records `device` as
    /// 16-bit PCM at `format`'s rate and channels; the server converts. Throws
    /// ``AudioError/unreadable(path:reason:)`` naming the server's reason.
    package init(device: AVCaptureDevice, format: AVAudioFormat, application: String) throws(AudioError) {
        let pa = try Pulse.api()
        var spec = pa_sample_spec(format: PA_SAMPLE_S16LE, rate: UInt32(format.sampleRate), channels: UInt8(format.channelCount))
        var error: Int32 = 0
        let source = device.uniqueID.isEmpty ? nil : device.uniqueID
        guard let stream = pa.pa_simple_new(nil, application, PA_STREAM_RECORD, source, "speech", &spec, nil, nil, &error) else {
            throw .unreadable(path: device.uniqueID.isEmpty ? "the default sound source" : device.uniqueID, reason: Pulse.message(pa, error))
        }
        self.format = format
        self.stream = stream
        self.pa = pa
    }

    deinit { pa.pa_simple_free(stream) }

    /// The next `frames` frames as interleaved Float32 samples (waits until they are recorded).
    package func read(frames: Int) throws(AudioError) -> [Float] {
        var bytes = [UInt8](repeating: 0, count: frames * Int(format.channelCount) * 2)
        var error: Int32 = 0
        let status = bytes.withUnsafeMutableBytes { pa.pa_simple_read(stream, $0.baseAddress, $0.count, &error) }
        guard status == 0 else { throw .unreadable(path: "the sound source", reason: Pulse.message(pa, error)) }
        return try PCM.floats(fromLittleEndian: bytes, width: 2)
    }
}
