import Dispatch
import EarshotAudio
import EarshotSystem
import EarshotWire
import Foundation

/// One analysis session: a time-coded input timeline fanned out to N modules, each producing
/// volatile and final results about ranges of that timeline (Apple's `SpeechAnalyzer` semantics).
///
/// All engine work runs on the session's own serial queue — a dedicated thread, never the
/// cooperative pool. Audio is 16 kHz mono s16le; a voice activity detector cuts the stream into
/// speech segments: offline transcribers decode each segment once it ends (and, for volatile
/// results, re-decode the open one as it grows); streaming decoders follow the speech as it
/// arrives; detectors report speech and silence ranges.
///
/// Segments decode concurrently: each ended segment goes to the session's decode queue (at most
/// `decodeParallelism` at once, holding at most ``maxDecodingSamples``; the daemon-wide gate inside
/// the shared model bounds all sessions together) while the VAD reads on, and ``OrderedEvents``
/// emits every event in the order a sequential session would.
public final class AnalysisSession: @unchecked Sendable {
    public static let sampleRate: Int32 = 16000
    public let id: String
    private let queue: DispatchQueue
    private let window: DecodeWindow

    // Confined to `queue`.
    private let events: OrderedEvents
    private var modules: [SessionModule]
    private let vad: any SpeechSegmenting
    /// The detector went to another session (``releaseDetector()``); this one never touches it again.
    private var detectorReleased = false
    /// Set (on the queue) when the session finishes; read from any thread.
    private let ended = OnceFlag()
    /// Samples given to the VAD so far (its index space).
    private var consumed: Int64 = 0
    /// Contiguous runs of input: VAD index where each starts and its stream time.
    private var runs: [(vadStart: Int64, time: WireTime)] = [(0, .zero)]
    /// Stream time just after the last consumed sample.
    private var lastTime: WireTime?
    /// Audio before this stream time is dropped (`cancelAnalysis(before:)`); set from any thread so
    /// audio already queued behind it is skipped too.
    private let cutoff = Cutoff()
    /// Input the VAD has not yet passed (from the earliest sample a coming segment may start at),
    /// and the VAD index of the first; at most ``maxOpenSamples``.
    private var open: [Float] = []
    private var openStart: Int64 = 0
    /// The last second, prepended when a streaming decoder starts an utterance.
    private var preroll: [Float] = []
    private var utteranceStart: Int64?
    private var lastVolatileAt: Int64 = 0
    private var volatileInterval: Int64 = 16000
    private var lastDetectionEnd: Int64 = 0
    private var volatileRange: WireTimeRange?
    private var finished = false
    /// The first decode failure after the session began finishing (its `finished` event's error).
    private var lateFailure: (any Error)?
    private var finishAfter: WireTime?
    private var finishWaiters: [CheckedContinuation<WireTime?, Never>] = []
    private let backlog = Backlog(limit: AnalysisSession.maxQueuedSamples)
    /// Most samples of a recording's segments one Whisper decode takes together (0: one segment a
    /// decode, as for live input).
    private let recordingWindow: Int
    /// A recording's window being gathered, by module index: its segments, the place its results
    /// take among the events, and their ranges.
    private var gathering: [Int: Gathering] = [:]
    /// Recording windows sent to decode so far.
    private var windowsDispatched = 0
    /// A recording short enough for one window, decoded whole at audio-stop while the VAD still
    /// reads it (nil: the session's input or modules cannot use it).
    private let speculation: RecordingSpeculation?
    private let observer: (any SpeechObserver)?
    /// Most of a speculatively decoded input that may lie outside the VAD's segments for its result
    /// to be kept (Whisper makes words up in long silence): 2 s.
    static let maxSpeculativeSilence: Int64 = 2 * 16000
    /// The daemon's `speculativeBacklog`: half the input. Input sent in real time (a voice
    /// assistant) has been read by then but for its last chunk, and its window decodes as usual; a
    /// file sent at once has not.
    public static let defaultSpeculativeBacklog = 0.5
    /// Whether a recording's windows are decoded one after another, each prompted with the text of
    /// the one before (faster-whisper's `condition_on_previous_text`), instead of side by side.
    private let conditionOnPreviousText: Bool
    /// Per module: how each window's text reaches the next (``conditionOnPreviousText``).
    private var relays: [Int: TextRelay] = [:]

    /// A window whose kept result needed a temperature above this starts the chain afresh: its
    /// text is not passed on (faster-whisper's `prompt_reset_on_temperature`).
    static let promptResetTemperature = 0.5

    private struct Gathering {
        var group = SegmentGroup()
        var ranges: [WireTimeRange] = []
        let ticket: Int
        let model: any SegmentTranscribing
        let module: SessionModule
        /// Where the window takes its prompt from and passes its text on, given at dispatch
        /// (``conditionOnPreviousText``).
        var link: TextRelay.Link?
    }

    /// Audio accepted but not yet analysed before senders wait: 30 s.
    public static let maxQueuedSamples: Int64 = 30 * 16000
    /// Most open audio a session keeps for re-decoding (volatile results): 40 s (the VAD itself
    /// never needs more than about 32 s).
    public static let maxOpenSamples = 40 * 16000
    /// Most audio a session holds while analysing (open audio, pre-roll, the detector's history and
    /// segments not yet decoded): 2 minutes, about 7.3 MiB as Float32, however long the stream.
    /// Queued input (``maxQueuedSamples`` plus one frame) comes on top. A speculative copy
    /// (``RecordingSpeculation``) exists only while the whole input fits in one recording window,
    /// when the rest holds far less.
    public static let maxRetainedSamples = 120 * 16000
    /// Most audio a session's segment decodes in flight hold together: 40 s (the open audio, the
    /// pre-roll and the detector's history stay within 80 s, so the total stays under
    /// ``maxRetainedSamples``).
    public static let maxDecodingSamples = 40 * 16000
    /// Most contiguous runs the timeline keeps (runs before what the VAD may still emit go).
    static let maxRetainedRuns = 4
    /// Input is analysed in blocks of at most this many samples (1 s), so a large chunk never
    /// makes the session hold more than one block beyond its bounds.
    static let ingestBlock = 16000

    /// `decodeParallelism`: most segments decoded at once (the daemon uses one per core).
    /// `recordingWindow` (samples, at most ``maxDecodingSamples`` / 2; 0: off): the input is a
    /// whole recording, so consecutive segments are decoded together up to that much audio by
    /// modules without volatile results (``SegmentGroup``). `speculativeBacklog` (a share of
    /// the input; nil: never): such a recording's one window is decoded whole at audio-stop when
    /// the VAD still has at least that share of it to read (``RecordingSpeculation``).
    /// `observer` hears of speech that came back without text.
    public init(id: String, modules: [SessionModule], vad: any SpeechSegmenting, decodeParallelism: Int = 1, recordingWindow: Int = 0,
                speculativeBacklog: Double? = nil, conditionOnPreviousText: Bool = false, observer: (any SpeechObserver)? = nil,
                emit: @escaping @Sendable (SessionEvent) -> Void) {
        self.id = id
        self.conditionOnPreviousText = conditionOnPreviousText
        self.observer = observer
        self.modules = modules
        self.vad = vad
        self.recordingWindow = min(max(0, recordingWindow), Self.maxDecodingSamples / 2)
        events = OrderedEvents(emit: emit)
        window = DecodeWindow(label: "earshot.session.\(id).decode", lanes: decodeParallelism, maxSamples: Self.maxDecodingSamples)
        let windowed = modules.filter { !$0.wantsVolatile && $0.engine.segmentModel != nil }
        speculation = if let speculativeBacklog, self.recordingWindow > 0, windowed.count == 1, let model = windowed[0].engine.segmentModel {
            RecordingSpeculation(id: id, module: windowed[0].index, model: model, maxSamples: self.recordingWindow, minBacklog: speculativeBacklog)
        } else { nil }
        queue = DispatchQueue(label: "earshot.session.\(id)")
        LiveObjects.created("AnalysisSession")
    }

    deinit { LiveObjects.destroyed("AnalysisSession") }

    // MARK: Client operations (any thread)

    /// Appends PCM (s16le, 16 kHz, mono) at `start`, or right after the previous chunk. Waits
    /// while more than ``maxQueuedSamples`` are queued, so a fast sender is paced by analysis
    /// instead of filling memory.
    public func accept(_ pcm: [UInt8], format: AudioFormatSpec, start: WireTime?) async {
        let samples = Int64(pcm.count / 2)
        speculation?.add(pcm, format: format, start: start)
        await backlog.add(samples)
        queue.async { [self] in
            defer { backlog.remove(samples) }
            guard !finished else { return }
            guard format == .speech16k else {
                fail(SpeechError.unsupportedAudio("the analyzer takes \(AudioFormatSpec.speech16k.rate) Hz mono s16le; got \(format.rate) Hz, \(format.channels) channel(s), \(format.width * 8)-bit — convert before sending"))
                return
            }
            guard pcm.count % 2 == 0 else {
                fail(SpeechError.unsupportedAudio("an audio payload of \(pcm.count) bytes is not a whole number of 2-byte s16le samples"))
                return
            }
            do {
                var offset = 0
                var blockStart = start
                while offset < pcm.count, !finished {
                    let end = min(offset + 2 * Self.ingestBlock, pcm.count)
                    try ingest(try PCM.floats(fromLittleEndian: Array(pcm[offset..<end]), width: 2), start: blockStart)
                    blockStart = nil
                    offset = end
                }
            } catch {
                fail(error)
            }
        }
    }

    /// Finalizes everything received so far (at least through `time`); returns the last sample time
    /// once every result up to it has been emitted.
    public func finalize(through time: WireTime?) async -> WireTime? {
        speculation?.inputEnded(queued: backlog.queuedSamples, in: window)
        return await onQueueWhenEmitted { [self] in
            guard !finished else { return }
            do { try finalizeOpen() } catch { fail(error) }
        }
    }

    /// Ends the session as `mode` says; returns the last sample time consumed.
    public func finish(_ mode: FinishMode, time: WireTime?) async -> WireTime? {
        if mode == .after, let time {
            return await withCheckedContinuation { continuation in
                queue.async { [self] in
                    if finished { return events.whenEmitted { [self] in continuation.resume(returning: lastTime) } }
                    finishWaiters.append(continuation)
                    if let last = lastTime, last >= time { finishNow(finalizing: true) } else { finishAfter = time }
                }
            }
        }
        if mode != .cancelNow { speculation?.inputEnded(queued: backlog.queuedSamples, in: window) }
        return await onQueueWhenEmitted { [self] in
            if !finished { finishNow(finalizing: mode != .cancelNow) }
        }
    }

    /// Drops input before `time` (`cancelAnalysis(before:)`).
    public func cancelAnalysis(before time: WireTime) {
        speculation?.abandon()
        cutoff.raise(to: time)
    }

    /// Replaces the modules (same timeline): new modules see audio from now on; the open streaming
    /// utterance of removed decoders is dropped (new decoders decode whole segments until the next).
    public func setModules(_ newModules: [SessionModule]) async {
        speculation?.abandon()
        await onQueue { [self] in
            dispatchGathered()
            if utteranceStart != nil {
                for module in modules {
                    if case .streaming(let decoder) = module.engine { _ = try? decoder.endUtterance(alternatives: 0) }
                }
                utteranceStart = nil
            }
            modules = newModules
        }
    }

    /// Ends the session because the client went away or the daemon stops.
    public func abandon() {
        queue.async { [self] in if !finished { finishNow(finalizing: false) } }
    }

    /// Once the session has finished: its silero detector, reset, for another session to reuse
    /// (nil for another kind of detector, and at once while the session runs, so nobody waits
    /// behind its queued work). Runs after everything queued before the call, so the session's
    /// own work with the detector is done.
    func releaseDetector() async -> SileroDetector? {
        guard ended.isSet else { return nil }
        return await releaseDetectorAfterQueuedWork()
    }

    /// ``releaseDetector()`` after the work queued before the call, whether or not the session
    /// had finished when called: an abandoned session's finish is queued work too. Waits behind
    /// a blocked queue; only a task nobody waits for should call it.
    func releaseDetectorAfterQueuedWork() async -> SileroDetector? {
        await onQueue { [self] in
            guard finished, !detectorReleased, let detector = vad as? SileroDetector else { return nil }
            detectorReleased = true
            // A detector whose engine process ended is no use to anyone.
            return (try? detector.reset()) == nil ? nil : detector
        }
    }

    /// What a session holds of its input, in samples (and contiguous runs), for memory tests.
    struct RetainedAudio: Sendable, Hashable {
        var open: Int
        var preroll: Int
        var detector: Int
        var decoding: Int
        var runs: Int
        /// The copy of a short recording kept for ``RecordingSpeculation`` (until it decodes).
        var speculative = 0
        var samples: Int { open + preroll + detector + decoding + speculative }
    }

    /// The audio the session holds now (after everything queued before the call).
    func retainedAudio() async -> RetainedAudio {
        await onQueue { [self] in
            RetainedAudio(open: open.count, preroll: preroll.count, detector: detectorReleased ? 0 : vad.retainedSamples, decoding: window.samples, runs: runs.count,
                          speculative: speculation?.keptSamples ?? 0)
        }
    }

    private func onQueue<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: body()) }
        }
    }

    /// Runs `body` on the queue; returns the last sample time once everything emitted by then has
    /// gone out (decodes in flight included).
    private func onQueueWhenEmitted(_ body: @escaping @Sendable () -> Void) async -> WireTime? {
        await withCheckedContinuation { continuation in
            queue.async { [self] in
                body()
                events.whenEmitted { [self] in continuation.resume(returning: lastTime) }
            }
        }
    }

    // MARK: Timeline (on queue)

    private func time(at index: Int64) -> WireTime {
        let run = runs.last { $0.vadStart <= index } ?? runs[0]
        return run.time + WireTime(value: index - run.vadStart, timescale: Self.sampleRate)
    }

    private func ingest(_ samplesIn: [Float], start: WireTime?) throws {
        var samples = samplesIn
        var chunkStart = start ?? lastTime ?? .zero
        // Drop what predates cancelAnalysis(before:); dropped audio still takes its time.
        if let cutoff = cutoff.value {
            let chunkEnd = chunkStart + WireTime(value: Int64(samples.count), timescale: Self.sampleRate)
            if chunkEnd <= cutoff {
                lastTime = chunkEnd
                return
            }
            if chunkStart < cutoff {
                let skip = Int((cutoff - chunkStart).converted(to: Self.sampleRate).value)
                samples.removeFirst(min(skip, samples.count))
                chunkStart = cutoff.converted(to: Self.sampleRate)
            }
        }
        guard !samples.isEmpty else { return }
        if time(at: consumed) != chunkStart {
            // Discontiguous input: close what is open, then start a new run at `chunkStart`.
            try finalizeOpen()
            runs.append((consumed, chunkStart))
        }
        let first = consumed
        consumed += Int64(samples.count)
        lastTime = time(at: consumed)
        open += samples
        preroll = Array((preroll + samples).suffix(Int(Self.sampleRate)))
        try vad.accept(samples)
        try feedStreaming(samples, from: first)
        try drainSegments()
        try emitVolatile()
        trimToPending()
        if let after = finishAfter, let last = lastTime, last >= after { finishNow(finalizing: true) }
    }

    /// Drops what the VAD has passed: open audio before the earliest sample a coming segment can
    /// start at (never more than ``maxOpenSamples`` kept), and timeline runs nothing refers to.
    private func trimToPending() {
        let keepFrom = max(min(vad.pendingStart, consumed), consumed - Int64(Self.maxOpenSamples))
        if keepFrom > openStart {
            let drop = Int(min(keepFrom - openStart, Int64(open.count)))
            open.removeFirst(drop)
            openStart += Int64(drop)
        }
        // Times are still asked for from the earliest of these indices on.
        let needed = min(openStart, lastDetectionEnd, utteranceStart ?? openStart, vad.pendingStart)
        if runs.count > 1, let keep = runs.lastIndex(where: { $0.vadStart <= needed }), keep > 0 {
            runs.removeFirst(keep)
        }
    }

    /// Follows speech as it arrives in streaming decoders that report volatile results (the others
    /// decode each segment whole when it ends, which is as accurate and cheaper).
    private func feedStreaming(_ samples: [Float], from first: Int64) throws {
        let decoders = modules.compactMap { module -> (any StreamingDecoding)? in
            if case .streaming(let d) = module.engine, module.wantsVolatile { return d }
            return nil
        }
        guard !decoders.isEmpty else { return }
        if utteranceStart == nil, vad.isSpeech {
            let lead = preroll.count
            utteranceStart = max(openStart, consumed - Int64(lead))
            let lead16 = Array(preroll.suffix(Int(consumed - utteranceStart!)))
            for decoder in decoders {
                try decoder.startUtterance()
                try decoder.process(lead16)
            }
        } else if utteranceStart != nil {
            for decoder in decoders { try decoder.process(samples) }
        }
    }

    /// Turns every finished speech segment into final results.
    private func drainSegments() throws {
        for segment in vad.popSegments() {
            let start = segment.startSample
            let end = start + Int64(segment.samples.count)
            for module in modules {
                switch module.engine {
                case .segments(let model):
                    if recordingWindow > 0, !module.wantsVolatile {
                        gather(segment, with: model, for: module)
                    } else {
                        decode(segment.samples, with: model, for: module, range: range(from: start, to: end))
                    }
                case .streaming(let decoder):
                    let alternatives = module.wantsAlternatives ? 4 : 0
                    // The streamed utterance is used when it began with the segment; one started
                    // late (VAD onset lag beyond the pre-roll) is redone on the whole segment.
                    if let uttStart = utteranceStart, uttStart <= start + Int64(Self.sampleRate) / 10 {
                        publish(module, try decoder.endUtterance(alternatives: alternatives), from: uttStart, to: end, final: true)
                    } else {
                        if utteranceStart != nil { _ = try decoder.endUtterance(alternatives: 0) }
                        publish(module, try decoder.decodeWhole(segment.samples, alternatives: alternatives), from: start, to: end, final: true)
                    }
                case .detector:
                    guard module.reportsDetection else { continue }
                    if start > lastDetectionEnd { publishDetection(module, from: lastDetectionEnd, to: start, speech: false) }
                    publishDetection(module, from: start, to: end, speech: true)
                }
            }
            lastDetectionEnd = end
            utteranceStart = nil
            let drop = Int(min(max(end - openStart, 0), Int64(open.count)))
            open.removeFirst(drop)
            openStart += Int64(drop)
            lastVolatileAt = openStart
            updateVolatileRange(nil)
        }
    }

    /// Decodes a final segment on a decode lane once the window admits it (blocking this queue
    /// meanwhile: back-pressure); its result takes its place among the events.
    /// A segment of at least ``WindowTranscript/minimumSamples`` that comes back without text is
    /// flagged (its neighbours were decoded on their own, so there is no other boundary to try).
    private func decode(_ samples: [Float], with model: any SegmentTranscribing, for module: SessionModule, range: WireTimeRange) {
        let ticket = events.reserve()
        window.reserve(samples: samples.count)
        decodeReserved(samples, with: model, filling: ticket) { [self] transcription in
            let unheard = samples.count >= WindowTranscript.minimumSamples && SegmentGroup.isEmpty(transcription)
            if unheard { reportUnheard([range]) }
            return [.result(result(module, transcription, range: range, final: true, unheard: unheard))]
        }
    }

    /// Decodes `samples` (reserved in the window) on a decode lane; `events(transcription)` fill
    /// the place `ticket` holds (on the queue), and a failure ends the session.
    private func decodeReserved(_ samples: [Float], with model: any SegmentTranscribing, filling ticket: Int,
                                _ events: @escaping @Sendable (Transcription) -> [SessionEvent]) {
        window.transcribe(samples, with: model) { [self] outcome in
            queue.async { [self] in
                switch outcome {
                case .success(let transcription): self.events.fill(ticket, with: events(transcription))
                case .failure(let error): decodeFailed(ticket, error)
                }
            }
        }
    }

    /// Adds a recording's segment to its module's window, decoding the window first when the
    /// segment would make it longer than ``recordingWindow``. Reserving the segment's samples may
    /// wait for decodes in flight (back-pressure), never for windows still being gathered.
    private func gather(_ segment: SpeechSegment, with model: any SegmentTranscribing, for module: SessionModule) {
        let count = segment.samples.count
        if let current = gathering[module.index], current.group.samples.count + count > recordingWindow {
            dispatchGathered(module.index)
        }
        // Other modules' windows go first if together they would leave this reservation waiting
        // on samples that only their own decodes can give back.
        if gathering.values.reduce(count, { $0 + $1.group.samples.count }) > Self.maxDecodingSamples {
            for other in gathering.keys.sorted() where other != module.index { dispatchGathered(other) }
        }
        window.reserve(samples: count)
        var current = gathering[module.index] ?? Gathering(ticket: events.reserve(), model: model, module: module)
        current.group.append(segment)
        current.ranges.append(range(from: segment.startSample, to: segment.startSample + Int64(count)))
        gathering[module.index] = current
    }

    /// Decodes the gathered window of module `index` (of every module when nil) on a decode lane;
    /// each segment's share of the text takes the window's place among the events. The first
    /// window of the speculating module takes the speculative decode's result instead when that
    /// decode covers the input so far and the window leaves little of it out; otherwise the window
    /// waits for that decode to end, so the two never share the cores.
    private func dispatchGathered(_ index: Int? = nil) {
        for key in index.map({ [$0] }) ?? gathering.keys.sorted() {
            guard var gathered = gathering.removeValue(forKey: key) else { continue }
            if conditionOnPreviousText {
                let relay = relays[key] ?? TextRelay()
                relays[key] = relay
                gathered.link = relay.link()
            }
            let current = gathered
            let first = windowsDispatched == 0
            windowsDispatched += 1
            guard let speculation, speculation.module == key else {
                decodeWindow(current)
                continue
            }
            if first, speculation.claim(through: consumed), consumed - Int64(current.group.speechSamples) <= Self.maxSpeculativeSilence {
                // The window's samples stay reserved: a segment the speculative decode left
                // without text is decoded again from them.
                speculation.whenDone { [self] outcome in
                    switch outcome {
                    case .success(let transcription): decodeWindow(current, recovering: transcription)
                    case .failure(let error): queue.async { [self] in
                        current.link?.pass(nil, after: nil)
                        window.unreserve(samples: current.group.samples.count)
                        decodeFailed(current.ticket, error)
                    }
                    }
                }
            } else if speculation.isDecoding {
                speculation.whenDone { [self] _ in queue.async { [self] in decodeWindow(current) } }
            } else {
                decodeWindow(current)
            }
        }
    }

    /// A decode failed: its place gives nothing and the session ends with `error`; when it was
    /// finishing already, its `finished` event (sent once every decode is in) carries the error.
    private func decodeFailed(_ ticket: Int, _ error: any Error) {
        if finished { lateFailure = lateFailure ?? error }
        events.fill(ticket, with: [])
        fail(error)
    }

    /// Decodes a gathered window (its samples reserved) on a decode lane, and again the segments
    /// it leaves without text (``WindowTranscript``). With `speculative`, the window's input was
    /// decoded in place already: only its empty segments are decoded. With
    /// ``conditionOnPreviousText``, the decode waits, on its lane, for the text of the module's
    /// windows before (its prompt: the text since the last window that needed a high
    /// temperature, ``TextRelay``): a module's windows search one at a time, in order; a model
    /// that can encodes the window's audio while it waits (``TextRelay/Prompted``). Any thread.
    private func decodeWindow(_ current: Gathering, recovering speculative: Transcription? = nil) {
        let (group, link) = (current.group, current.link)
        let prompted = link.map { TextRelay.Prompted(current.model, link: $0) }
        let model: any SegmentTranscribing = prompted ?? current.model
        let rate = Int(Self.sampleRate)
        window.perform(reserved: group.samples.count, {
            do {
                let transcript = if let speculative {
                    try group.recover(speculative, placedBy: group.inPlace, with: model, sampleRate: rate)
                } else {
                    try group.transcribe(with: model, sampleRate: rate)
                }
                link?.pass(Self.passedOn(transcript), after: prompted?.previousText())
                return transcript
            } catch {
                link?.pass(nil, after: prompted?.previousText())
                throw error
            }
        }, then: { [self] outcome in
            queue.async { [self] in
                switch outcome {
                case .success(let transcript): events.fill(current.ticket, with: windowEvents(current, transcript))
                case .failure(let error): decodeFailed(current.ticket, error)
                }
            }
        })
    }

    /// The text a window passes on to the next: nil when it needed a temperature above
    /// ``promptResetTemperature`` (its text is the likeliest to be wrong) or has none.
    private static func passedOn(_ transcript: WindowTranscript) -> String? {
        if (transcript.whole.measures?.temperature ?? 0) > promptResetTemperature { return nil }
        let text = (transcript.shares ?? [transcript.whole]).map(\.text).joined(separator: " ").trimmingCharacters(in: .whitespaces)
        return text.isEmpty ? nil : text
    }

    /// Each segment's share of a window's transcript as its result; segments still without text
    /// are flagged and reported.
    private func windowEvents(_ current: Gathering, _ transcript: WindowTranscript) -> [SessionEvent] {
        guard let shares = transcript.shares else {
            // No word times: one result over the whole window.
            let range = WireTimeRange(start: current.ranges[0].start, end: current.ranges[current.ranges.count - 1].end)
            return [.result(result(current.module, transcript.whole, range: range, final: true))]
        }
        reportUnheard(SegmentGroup.runs(transcript.unheard.sorted()).map { run in
            WireTimeRange(start: current.ranges[run[0]].start, end: current.ranges[run[run.count - 1]].end)
        })
        return shares.indices.map { .result(result(current.module, shares[$0], range: current.ranges[$0], final: true, unheard: transcript.unheard.contains($0))) }
    }

    /// Tells the observer about speech that came back without text (each range once).
    private func reportUnheard(_ ranges: [WireTimeRange]) {
        for range in ranges { observer?.speechWithoutText(session: id, range: range) }
    }

    /// Drops the windows being gathered (the session ends without finalizing).
    private func dropGathered() {
        for current in gathering.values {
            window.unreserve(samples: current.group.samples.count)
            events.fill(current.ticket, with: [])
        }
        gathering = [:]
    }

    /// Re-decodes the open speech for modules that asked for volatile results.
    private func emitVolatile() throws {
        guard vad.isSpeech else { return }
        for module in modules where module.wantsVolatile {
            switch module.engine {
            case .segments(let model):
                guard consumed - lastVolatileAt >= volatileInterval else { continue }
                let maxSamples = Int(WhisperModel.maximumDuration * Double(Self.sampleRate))
                let tail = Array(open.suffix(maxSamples))
                let began = DispatchTime.now()
                // Volatile text is redone often and replaced soon: greedy, no fallback.
                let transcription = try model.transcribe(tail, sampleRate: Int(Self.sampleRate), settings: DecodeSettings(beamSize: 1, temperatures: [0]))
                // Keep re-decoding from costing more than about half of real time.
                let took = Double(DispatchTime.now().uptimeNanoseconds - began.uptimeNanoseconds) / 1e9
                volatileInterval = max(16000, Int64(took * 2 * Double(Self.sampleRate)))
                lastVolatileAt = consumed
                publish(module, transcription, from: consumed - Int64(tail.count), to: consumed, final: false)
            case .streaming(let decoder):
                guard let uttStart = utteranceStart, let partial = decoder.partial(), !partial.text.isEmpty else { continue }
                publish(module, partial, from: uttStart, to: consumed, final: false)
            case .detector:
                continue
            }
        }
    }

    /// Forces the open speech to end and finalizes it.
    private func finalizeOpen() throws {
        try vad.flush()
        try drainSegments()
        dispatchGathered()
        // A streaming utterance the VAD never closed (e.g. input ended mid-word).
        if let uttStart = utteranceStart {
            for module in modules {
                if case .streaming(let decoder) = module.engine {
                    publish(module, try decoder.endUtterance(alternatives: module.wantsAlternatives ? 4 : 0), from: uttStart, to: consumed, final: true)
                }
            }
            utteranceStart = nil
        }
        for module in modules where module.reportsDetection && consumed > lastDetectionEnd {
            if case .detector = module.engine { publishDetection(module, from: lastDetectionEnd, to: consumed, speech: false) }
        }
        lastDetectionEnd = consumed
        open = []
        openStart = consumed
        updateVolatileRange(nil)
    }

    // MARK: Results (on queue)

    private func range(from start: Int64, to end: Int64) -> WireTimeRange {
        WireTimeRange(start: time(at: start), end: time(at: max(end, start)))
    }

    private func publish(_ module: SessionModule, _ transcription: Transcription, from start: Int64, to end: Int64, final: Bool) {
        guard final || !transcription.text.trimmingCharacters(in: .whitespaces).isEmpty else { return }
        let range = range(from: start, to: end)
        events.send(.result(result(module, transcription, range: range, final: final)))
        if !final { updateVolatileRange(range) }
    }

    /// The result event for `transcription` of `range`.
    /// `unheard`: the range holds speech the engine gave no text for (``WindowTranscript``).
    private func result(_ module: SessionModule, _ transcription: Transcription, range: WireTimeRange, final: Bool, unheard: Bool = false) -> AnalyzerResult {
        let text = transcription.text.trimmingCharacters(in: .whitespaces)
        var runs: [TextRun]
        if (module.wantsTimeRanges || module.wantsConfidence), !transcription.words.isEmpty {
            runs = []
            for (i, word) in transcription.words.enumerated() {
                var wordRange: WireTimeRange?
                if module.wantsTimeRanges, let s = word.start, let e = word.end {
                    let ws = range.start + WireTime(seconds: s, timescale: Self.sampleRate)
                    wordRange = WireTimeRange(start: ws, end: max(ws, range.start + WireTime(seconds: e, timescale: Self.sampleRate)))
                }
                runs.append(TextRun(text: (i == 0 ? "" : " ") + word.text, range: wordRange,
                                    confidence: module.wantsConfidence ? word.confidence ?? transcription.confidence : nil))
            }
        } else {
            runs = [TextRun(text: text, range: module.wantsTimeRanges ? range : nil,
                            confidence: module.wantsConfidence ? transcription.confidence : nil)]
        }
        if final, text.isEmpty { runs = [] }
        let finalization = final ? range.end : time(at: openStart)
        return AnalyzerResult(session: id, module: module.index, range: range, finalizationTime: finalization, isFinal: final,
                              runs: runs, alternatives: module.wantsAlternatives ? transcription.alternatives : [],
                              language: transcription.language, speechWithoutText: unheard ? true : nil,
                              decoding: final && !text.isEmpty ? transcription.measures : nil)
    }

    private func publishDetection(_ module: SessionModule, from start: Int64, to end: Int64, speech: Bool) {
        guard end > start else { return }
        let range = WireTimeRange(start: time(at: start), end: time(at: end))
        events.send(.result(AnalyzerResult(session: id, module: module.index, range: range, finalizationTime: range.end, isFinal: true, runs: [], speechDetected: speech)))
    }

    private func updateVolatileRange(_ range: WireTimeRange?) {
        guard range != volatileRange else { return }
        volatileRange = range
        events.send(.volatileRange(range))
    }

    private func finishNow(finalizing: Bool) {
        if finalizing {
            do { try finalizeOpen() } catch { return fail(error) }
        }
        dropGathered()
        finished = true
        ended.set()
        // After the decodes in flight: one that fails still ends the session with its error.
        events.whenEmitted { [self] in events.send(.finished(lateFailure)) }
        resumeFinishWaiters()
    }

    /// Ends the session because of `error` (typed: the daemon's error map turns it into a wire code).
    private func fail(_ error: any Error) {
        guard !finished else { return }
        dropGathered()
        finished = true
        ended.set()
        events.send(.finished(error))
        resumeFinishWaiters()
    }

    /// Resumes `finish(.after)` callers once the events before `finished` have gone out.
    private func resumeFinishWaiters() {
        let waiters = finishWaiters
        finishWaiters = []
        events.whenEmitted { [self] in waiters.forEach { $0.resume(returning: lastTime) } }
    }
}

/// Counts queued samples; adders wait while the count is above the limit.
final class Backlog: @unchecked Sendable {
    private let lock = NSLock()
    private let limit: Int64
    private var queued: Int64 = 0
    private var waiters: [CheckedContinuation<Void, Never>] = []

    init(limit: Int64) { self.limit = limit }

    /// Samples added and not yet removed.
    var queuedSamples: Int64 { lock.withLock { queued } }

    func add(_ count: Int64) async {
        while true {
            let admitted = lock.withLock {
                guard queued <= limit else { return false }
                queued += count
                return true
            }
            if admitted { return }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let retryNow = lock.withLock {
                    guard queued > limit else { return true }
                    waiters.append(continuation)
                    return false
                }
                if retryNow { continuation.resume() }
            }
        }
    }

    func remove(_ count: Int64) {
        let ready: [CheckedContinuation<Void, Never>] = lock.withLock {
            queued -= count
            guard queued <= limit else { return [] }
            defer { waiters = [] }
            return waiters
        }
        // Woken senders retry `add`, which counts their samples.
        for waiter in ready { waiter.resume() }
    }
}

/// A time that only moves forward, readable and settable from any thread.
final class Cutoff: @unchecked Sendable {
    private let lock = NSLock()
    private var time: WireTime?
    var value: WireTime? { lock.withLock { time } }
    func raise(to newTime: WireTime) {
        lock.withLock { if time.map({ newTime > $0 }) ?? true { time = newTime } }
    }
}
