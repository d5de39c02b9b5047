import EarshotAudio
import EarshotSystem
import Foundation

/// The kind of a track (AVFoundation's `AVMediaType`).
public struct AVMediaType: RawRepresentable, Hashable, Sendable {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let audio = AVMediaType(rawValue: "soun")
}

/// Timed media (AVFoundation's `AVAsset`); create an ``AVURLAsset``.
public class AVAsset: @unchecked Sendable {
    // Immutable after init; subclasses add only immutable state.
    package let source: URL

    init(source: URL) { self.source = source }

    /// The tracks of `mediaType`: a file libsndfile decodes has one audio track (ID 1). Throws
    /// ``AudioError`` when the file cannot be read. The file is probed on a dedicated thread.
    public func loadTracks(withMediaType mediaType: AVMediaType) async throws -> [AVAssetTrack] {
        let source = source
        let format = try await BlockingWork.run("earshot.asset-probe") { () throws(AudioError) -> AVAudioFormat in
            try AVAudioFile(forReading: source).processingFormat
        }
        return mediaType == .audio ? [AVAssetTrack(trackID: 1, mediaType: .audio, naturalFormat: format)] : []
    }
}

/// An asset at a URL (AVFoundation's `AVURLAsset`): a local audio file.
public final class AVURLAsset: AVAsset, @unchecked Sendable {
    public let url: URL

    /// `options` are accepted for source compatibility and ignored.
    public init(url URL: URL, options: [String: any Sendable]? = nil) {
        url = URL
        super.init(source: URL)
    }
}

/// One track of an asset (AVFoundation's `AVAssetTrack`).
public final class AVAssetTrack: Sendable {
    public let trackID: Int32
    public let mediaType: AVMediaType
    /// The track's decoded format (Float32 at its rate and channels).
    package let naturalFormat: AVAudioFormat

    init(trackID: Int32, mediaType: AVMediaType, naturalFormat: AVAudioFormat) {
        self.trackID = trackID
        self.mediaType = mediaType
        self.naturalFormat = naturalFormat
    }
}
