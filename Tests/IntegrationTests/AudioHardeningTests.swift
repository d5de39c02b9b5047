import EarshotWire
import Foundation
import Testing
import TestSupport

/// Issue 8's audio defects against the real daemon (dictation only, so every transcription is
/// PocketSphinx and quick): hostile Wyoming formats (#1), the Wyoming leak (#2), memory over long
/// streams (#6) and the error code of a partial sample frame (#8). Memory is the daemon's own, from
/// `/proc` (peak since a reset, so freed allocations still count) and `earshot.stats`.
@Suite(.serialized, .speechDaemon(modules: ["dictation"]))
struct AudioHardeningTests {
    static let model = "pocketsphinx-en-us"
    static let mono16k = AudioFormatFields(rate: 16000, width: 2, channels: 1)

    /// #1 "One frame takes the daemon down": `audio-start {rate: 1, width: 1, channels: 1}` and one
    /// `audio-chunk` made the resampler allocate input × 16000 floats (4 KiB: 1 GB; 64 KiB: a
    /// crash). Bounded variant: 1 KiB, which cost the old daemon about 260 MB at its peak. Now the
    /// format is refused (`unsupportedAudioFormat`) before anything is allocated.
    @Test func oneFrameTakesTheDaemonDown() async throws {
        let daemon = try SpeechDaemon.shared()
        let memory = ProcessMemory(pid: daemon.child.pid)
        let client = try TestConnection(daemon.socket)
        defer { client.close() }
        let hostile = AudioFormatFields(rate: 1, width: 1, channels: 1)
        try await client.send(Transcribe(name: Self.model))
        try await client.send(AudioStart(format: hostile))
        let started = try #require(try await client.next(timeout: .seconds(30)))
        try memory.resetPeak()
        let before = memory.resident
        try await client.send(AudioChunk(format: hostile), payload: [UInt8](repeating: 0x80, count: 1024))
        try await client.send(AudioStop())
        let frames = try await client.untilPong(timeout: .seconds(300))
        let grew = memory.peak - before
        print("[hostile] rate 1 Hz: replies \([started.type] + frames.map(\.type)), peak +\(grew >> 20) MiB")
        #expect(started.type == ErrorEvent.eventType, "audio-start at 1 Hz was accepted")
        #expect(started.errorEvent?.code == .unsupportedAudioFormat)
        #expect(started.errorEvent?.text.contains("8000") == true, "the error names the supported range")
        let chunkError = frames.first { $0.type == ErrorEvent.eventType }
        #expect(chunkError?.errorEvent?.code == .unsupportedAudioFormat, "the chunk is refused too: \(frames.map(\.type))")
        #expect(grew < 16 << 20, "one 1 KiB frame made the daemon's resident memory peak \(grew >> 20) MiB higher")
        #expect(daemon.child.process.isRunning)
    }

    /// Formats outside the documented range (PROTOCOL.md: 8000…384000 Hz, width 1/2/4, 1…8
    /// channels) are refused at `audio-start`; the extremes inside it are converted in bounded
    /// memory, one large frame included.
    @Test(arguments: [
        AudioFormatFields(rate: 7999, width: 2, channels: 1), AudioFormatFields(rate: 384_001, width: 2, channels: 1),
        AudioFormatFields(rate: 0, width: 2, channels: 1), AudioFormatFields(rate: -16000, width: 2, channels: 1),
        AudioFormatFields(rate: 16000, width: 3, channels: 1), AudioFormatFields(rate: 16000, width: 0, channels: 1),
        AudioFormatFields(rate: 16000, width: 2, channels: 0), AudioFormatFields(rate: 16000, width: 2, channels: 9),
    ])
    func oneFrameTakesTheDaemonDownOutsideTheRange(format: AudioFormatFields) async throws {
        let daemon = try SpeechDaemon.shared()
        let client = try TestConnection(daemon.socket)
        defer { client.close() }
        try await client.send(Transcribe(name: Self.model))
        try await client.send(AudioStart(format: format))
        let reply = try #require(try await client.next(timeout: .seconds(30)))
        #expect(reply.errorEvent?.code == .unsupportedAudioFormat, "\(format): \(reply.type)")
    }

    @Test(arguments: [
        // The largest ratio allowed (×2) with the narrowest samples: 1 MiB is 131 s of audio.
        (AudioFormatFields(rate: 8000, width: 1, channels: 1), 1 << 20),
        // The widest frames: 4 MiB (the payload limit) of 8-channel s32 at 384 kHz.
        (AudioFormatFields(rate: 384_000, width: 4, channels: 8), 4 << 20),
    ])
    func oneFrameTakesTheDaemonDownAtTheEdgesOfTheRange(format: AudioFormatFields, bytes: Int) async throws {
        let daemon = try SpeechDaemon.shared()
        let memory = ProcessMemory(pid: daemon.child.pid)
        let client = try TestConnection(daemon.socket)
        defer { client.close() }
        try await client.send(Transcribe(name: Self.model))
        try await client.send(AudioStart(format: format))
        let started = try #require(try await client.next(timeout: .seconds(30)))
        #expect(started.type == TranscriptStart.eventType, "\(format) refused: \(started.errorEvent?.text ?? "")")
        // Silence in the format (unsigned 8-bit silence is 0x80).
        let payload = [UInt8](repeating: format.width == 1 ? 0x80 : 0, count: bytes)
        try memory.resetPeak()
        let before = memory.resident
        try await client.send(AudioChunk(format: format), payload: payload)
        try await client.send(AudioStop())
        let frames = try await client.untilPong(timeout: .seconds(120))
        let grew = memory.peak - before
        print("[edge] \(format.rate) Hz × \(format.width) B × \(format.channels): \(bytes >> 10) KiB frame, peak +\(grew >> 20) MiB")
        #expect(frames.contains { $0.type == Transcript.eventType }, "\(frames.map(\.type))")
        #expect(!frames.contains { $0.type == ErrorEvent.eventType })
        // The frame itself is 1–4 MiB; conversion adds a bounded block, not a multiple of the frame.
        #expect(grew < bytes + (12 << 20), "peak +\(grew >> 20) MiB for a \(bytes >> 10) KiB frame")
    }

    /// #8 "Wrong error code": a chunk that is not a whole number of sample frames (width ×
    /// channels) was an `internalError`; it is `unsupportedAudioFormat`, says why, and the
    /// transcription goes on with the next chunk.
    @Test(arguments: [(AudioFormatFields(rate: 16000, width: 2, channels: 1), 3201), (AudioFormatFields(rate: 16000, width: 2, channels: 2), 6)])
    func wrongErrorCodeForAChunkThatIsNotWholeFrames(format: AudioFormatFields, bytes: Int) async throws {
        let daemon = try SpeechDaemon.shared()
        let client = try TestConnection(daemon.socket)
        defer { client.close() }
        try await client.send(Transcribe(name: Self.model))
        try await client.send(AudioStart(format: format))
        #expect(try await client.next(timeout: .seconds(30))?.type == TranscriptStart.eventType)
        try await client.send(AudioChunk(format: format), payload: [UInt8](repeating: 0, count: bytes))
        let replies = try await client.untilPong(timeout: .seconds(30))
        let error = try #require(replies.first { $0.type == ErrorEvent.eventType }?.errorEvent, "no error for \(bytes) bytes: \(replies.map(\.type))")
        print("[partial frame] \(bytes) bytes at width \(format.width) × \(format.channels): \(error.code?.rawValue ?? "nil"): \(error.text)")
        #expect(error.code == .unsupportedAudioFormat)
        #expect(error.text.contains("\(bytes) bytes") && error.text.contains("\(format.width * format.channels)-byte"), "unclear: \(error.text)")
        // The transcription continues.
        try await client.send(AudioChunk(format: format), payload: [UInt8](repeating: 0, count: 4 * format.width * format.channels * 800))
        try await client.send(AudioStop())
        let end = try await client.untilPong(timeout: .seconds(30))
        #expect(end.map(\.type).suffix(2) == [Transcript.eventType, TranscriptStop.eventType], "\(end.map(\.type))")
    }

    /// #2 "Wyoming ASR leaks memory": about 100 MB per PocketSphinx transcription (each leaked
    /// session kept its decoder). Eight transcriptions on one connection and one abandoned by a
    /// disconnect: the daemon's heap (anonymous resident memory) stays flat and every session object
    /// is freed.
    @Test func wyomingASRLeaksMemory() async throws {
        let daemon = try SpeechDaemon.shared()
        let monitor = try TestConnection(daemon.socket)
        let client = try TestConnection(daemon.socket)
        defer { monitor.close(); client.close() }
        let pcm = PCMSamples.s16le(try SpeechFixtures.samples(SpeechFixtures.ids[1]) + [Float](repeating: 0, count: 8000))
        let chunks = stride(from: 0, to: pcm.count, by: 3200).map { Array(pcm[$0..<min($0 + 3200, pcm.count)]) }
        var resident: [Int] = []
        for _ in 0..<8 {
            try await client.send(Transcribe(name: Self.model))
            try await client.send(AudioStart(format: Self.mono16k))
            for chunk in chunks { try await client.send(AudioChunk(format: Self.mono16k), payload: chunk) }
            try await client.send(AudioStop())
            let frames = try await client.untilPong(timeout: .seconds(60))
            let transcript = try #require(try frames.first { $0.type == Transcript.eventType }?.decode(Transcript.self), "\(frames.map(\.type))")
            #expect(SpeechFixtures.words(transcript.text).contains("man"), "\(transcript.text)")
            // The session's decoder is freed after its transcript is sent: measure once it is gone,
            // so what is compared is what stays behind.
            let ended = try await monitor.pollStats { $0.liveObjects?["PocketSphinxDecoder"] == 0 && $0.sessions == 0 }
            resident.append(ended.anonymousBytes ?? ended.residentBytes)
        }
        // A client that goes away mid-transcription.
        let quitter = try TestConnection(daemon.socket)
        try await quitter.send(Transcribe(name: Self.model))
        try await quitter.send(AudioStart(format: Self.mono16k))
        for chunk in chunks.prefix(chunks.count / 2) { try await quitter.send(AudioChunk(format: Self.mono16k), payload: chunk) }
        _ = try await quitter.untilPong(timeout: .seconds(30))
        quitter.close()

        let kinds = ["AnalysisSession", "PocketSphinxDecoder", "SileroDetector", "WyomingTranscription"]
        let stats = try await monitor.pollStats { stats in kinds.allSatisfy { stats.liveObjects?[$0] == 0 } && stats.sessions == 0 }
        let mib = resident.map { $0 >> 20 }
        print("[wyoming leak] anonymous resident MiB after each transcription: \(mib); live objects \(stats.liveObjects ?? [:])")
        for kind in kinds { #expect(stats.liveObjects?[kind] == 0, "\(kind): \(stats.liveObjects?[kind].map(String.init) ?? "not reported") still alive") }
        #expect(stats.liveObjects?["Resampler", default: 0] == 0)
        #expect(stats.sessions == 0)
        // After the first two (allocator warm-up) nothing may accumulate.
        let settled = resident.dropFirst(2)
        #expect(settled.max()! - settled.min()! < 48 << 20, "resident memory grew: \(mib) MiB")
    }

    /// The same through a resampled path (44.1 kHz stereo): the resampler goes with its session.
    @Test func wyomingASRLeaksMemoryWithResampling() async throws {
        let daemon = try SpeechDaemon.shared()
        let monitor = try TestConnection(daemon.socket)
        let client = try TestConnection(daemon.socket)
        defer { monitor.close(); client.close() }
        let format = AudioFormatFields(rate: 44100, width: 2, channels: 2)
        for _ in 0..<2 {
            try await client.send(Transcribe(name: Self.model))
            try await client.send(AudioStart(format: format))
            for _ in 0..<10 { try await client.send(AudioChunk(format: format), payload: [UInt8](repeating: 0, count: 17640)) }
            try await client.send(AudioStop())
            let frames = try await client.untilPong(timeout: .seconds(60))
            #expect(frames.map(\.type).suffix(2) == [Transcript.eventType, TranscriptStop.eventType], "\(frames.map(\.type))")
        }
        let stats = try await monitor.pollStats { $0.liveObjects?["Resampler"] == 0 && $0.liveObjects?["AnalysisSession"] == 0 }
        #expect(stats.liveObjects?["Resampler"] == 0, "\(stats.liveObjects ?? [:])")
        #expect(stats.liveObjects?["AnalysisSession"] == 0, "\(stats.liveObjects ?? [:])")
    }

    /// #6 "Memory grows with stream length" through the daemon: 20 minutes of silence sent as fast
    /// as the session takes it; resident memory stays flat after the first four minutes.
    @Test func memoryGrowsWithStreamLength() async throws {
        let daemon = try SpeechDaemon.shared()
        let monitor = try TestConnection(daemon.socket)
        let client = try TestConnection(daemon.socket)
        defer { monitor.close(); client.close() }
        var session = try await WireSession.opened(client, [SpeechFixtures.dictation()])
        let tenSeconds = [UInt8](repeating: 0, count: 10 * SpeechFixtures.rate * 2)
        var resident: [Int] = []
        let began = ContinuousClock.now
        for index in 1...120 {
            try await client.send(AnalyzerAudio(session: session.id, format: .speech16k, start: nil), payload: tenSeconds)
            if index % 12 == 0 { resident.append(try await monitor.stats().residentBytes) }
        }
        let done = try await session.finish(timeout: .seconds(300))
        let elapsed = ContinuousClock.now - began
        let mib = resident.map { $0 >> 20 }
        print("[long silence] 20 min in \(elapsed): resident MiB every 2 min: \(mib)")
        #expect(done.lastSampleTime == WireTime(value: 1200, timescale: 1))
        #expect(session.finished?.error == nil)
        // Allocator noise is about ±10 MiB; the old daemon grew 3–4 MiB a minute (open audio).
        let settled = resident.dropFirst(2)
        #expect(settled.max()! - settled.min()! < 32 << 20, "resident memory grew over 20 minutes of silence: \(mib) MiB")
    }
}

extension TestConnection {
    /// Sends a `ping` and returns every frame before the `pong`: the daemon handles a connection's
    /// frames in order, so everything sent before has been answered.
    func untilPong(timeout: Duration) async throws -> [Frame] {
        try await send(Ping())
        let deadline = ContinuousClock.now + timeout
        var frames: [Frame] = []
        while true {
            let frame = try #require(try await next(timeout: deadline - ContinuousClock.now), "the daemon closed the connection after \(frames.map(\.type))")
            if frame.type == Pong.eventType { return frames }
            frames.append(frame)
        }
    }
}

extension Frame {
    /// The error event this frame carries, if it is one.
    var errorEvent: ErrorEvent? {
        type == ErrorEvent.eventType ? try? decode(ErrorEvent.self) : nil
    }
}
