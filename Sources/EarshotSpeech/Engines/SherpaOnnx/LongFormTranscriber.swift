import EarshotAudio

/// Transcribes 16 kHz mono audio of any length completely and in bounded memory: the audio
/// streams through a ``SileroDetector`` and each speech segment (at most the detector's hard
/// limit, so it fits one Whisper decode) is transcribed as soon as it ends. Only the current
/// segment's samples are held; finished segments keep their text and sample range.
///
/// Blocking: run it on a dedicated thread. The model is shared; each call makes its own detector.
public struct LongFormTranscriber: Sendable {
    /// One transcribed speech segment.
    public struct Segment: Sendable, Hashable {
        /// First sample of the segment in the input (16 kHz).
        public var startSample: Int64
        public var sampleCount: Int
        public var transcription: Transcription

        public init(startSample: Int64, sampleCount: Int, transcription: Transcription) {
            self.startSample = startSample
            self.sampleCount = sampleCount
            self.transcription = transcription
        }

        /// Start in seconds from the beginning of the input.
        public var start: Double { Double(startSample) / Double(SileroDetector.sampleRate) }
        /// End in seconds from the beginning of the input.
        public var end: Double { Double(startSample + Int64(sampleCount)) / Double(SileroDetector.sampleRate) }
    }

    public let model: WhisperModel
    public let detector: SileroDetector.Configuration

    /// `detector` defaults to ``SileroDetector/Configuration/transcription`` (padded segments).
    public init(model: WhisperModel, detector: SileroDetector.Configuration = .transcription) {
        self.model = model
        self.detector = detector
    }

    /// Transcribes `chunks` (16 kHz mono, any sizes) in order, handing each segment to
    /// `onSegment` as soon as it is transcribed. Segments with no text are still reported.
    public func transcribe<Chunks: Sequence<[Float]>>(
        _ chunks: Chunks, onSegment: (Segment) throws -> Void
    ) throws {
        let vad = try SileroDetector(configuration: detector)
        func drain() throws {
            for speech in vad.popSegments() {
                let text = try model.transcribe(speech.samples, sampleRate: SileroDetector.sampleRate)
                try onSegment(Segment(startSample: speech.startSample, sampleCount: speech.samples.count, transcription: text))
            }
        }
        for chunk in chunks {
            try vad.accept(chunk)
            try drain()
        }
        try vad.flush()
        try drain()
    }

    /// Transcribes 16 kHz mono `samples`; the segments in order.
    public func transcribe(_ samples: [Float]) throws -> [Segment] {
        var segments: [Segment] = []
        let chunks = stride(from: 0, to: samples.count, by: 16000).lazy.map {
            Array(samples[$0..<min($0 + 16000, samples.count)])
        }
        try transcribe(chunks) { segments.append($0) }
        return segments
    }

    /// Transcribes an audio file of any format libsndfile reads, downmixed to mono and resampled
    /// to 16 kHz a chunk at a time; the segments in order.
    public func transcribe(file path: String) throws -> [Segment] {
        let reader = try AudioFileReader(path: path)
        let resampler = reader.sampleRate == SileroDetector.sampleRate
            ? nil : try Resampler(from: reader.sampleRate, to: SileroDetector.sampleRate, channels: 1)
        var segments: [Segment] = []
        var ended = false
        var failure: AudioError?
        let chunks = AnyIterator<[Float]> {
            if ended { return nil }
            do throws(AudioError) {
                let frames = PCM.downmix(try reader.read(frames: 16000), channels: reader.channels)
                if frames.isEmpty {
                    ended = true
                    return try resampler?.flush()
                }
                return try resampler?.process(frames) ?? frames
            } catch {
                ended = true
                failure = error
                return nil
            }
        }
        try transcribe(chunks) { segments.append($0) }
        if let failure { throw failure }
        return segments
    }
}
