import EarshotWire

/// One module of a session with the engine instance that serves it.
public enum SessionEngine {
    /// Offline segment transcription (shared model).
    case segments(any SegmentTranscribing)
    /// Incremental decoding (a decoder owned by this session).
    case streaming(any StreamingDecoding)
    /// Voice activity results only.
    case detector

    /// The shared model of a segment transcriber (nil for the other engines).
    var segmentModel: (any SegmentTranscribing)? {
        if case .segments(let model) = self { return model }
        return nil
    }
}

/// A module as a session runs it: its index in the client's list, what it asked for, its engine.
/// (Unchecked Sendable: a streaming decoder is handed to exactly one session and only ever used on
/// that session's queue.)
public struct SessionModule: @unchecked Sendable {
    public let index: Int
    public let configuration: ModuleConfiguration
    public let engine: SessionEngine

    public init(index: Int, configuration: ModuleConfiguration, engine: SessionEngine) {
        self.index = index
        self.configuration = configuration
        self.engine = engine
    }

    var wantsVolatile: Bool {
        configuration.reportingOptions.contains("volatileResults")
            || (configuration.preset.map { $0.lowercased().contains("progressive") } ?? false)
    }
    var wantsTimeRanges: Bool { configuration.attributeOptions.contains("audioTimeRange") }
    var wantsConfidence: Bool { configuration.attributeOptions.contains("transcriptionConfidence") }
    var wantsAlternatives: Bool { configuration.reportingOptions.contains("alternativeTranscriptions") }
    var reportsDetection: Bool { configuration.reportingOptions.contains("reportResults") }
}

/// What a session tells its client.
public enum SessionEvent: Sendable {
    case result(AnalyzerResult)
    case volatileRange(WireTimeRange?)
    /// The session ended; `error` when it ended because of one (a typed engine, audio or wire error).
    case finished((any Error)?)
}
