import Dispatch
import EarshotAssets
import EarshotAudio
import EarshotHTTP
import EarshotSystem
import EarshotTranscript
import EarshotWire
import Foundation

/// `POST /v1/audio/transcriptions` and `/v1/audio/translations`, field for field: the upload is
/// decoded (libsndfile) and converted a block at a time on the request's own queue, fed to a
/// session the ``AnalysisCoordinator`` opens for the caller, and the final results are written in
/// the asked format — or streamed as server-sent events.
struct OpenAITranscription: Sendable {
    enum Format: String, CaseIterable, Sendable { case json, text, srt, vtt, verboseJSON = "verbose_json" }

    /// The parsed, validated form.
    struct Parameters: Sendable {
        var file: HTTPFormFile
        var model: String
        var language: String?
        var format: Format
        var words: Bool
        var segments: Bool
        var stream: Bool
        /// Whisper's prompt and temperature.
        var decoding: DecodingOptions?
        /// Fields accepted but not honoured, with why: reported in the response, never dropped silently.
        var ignored: [String: String]
    }

    let coordinator: AnalysisCoordinator
    let errors: ErrorMap
    /// Where uploads are written for libsndfile (private to the daemon); each file is removed as
    /// soon as it is open.
    let scratch: String

    func respond(to request: HTTPRequest, client: AnalysisClient, translate: Bool) async -> HTTPResponse {
        let parameters: Parameters
        let module: TranscriptionRequest
        do {
            parameters = try Self.parameters(request.form, translate: translate)
            module = try await resolve(parameters, translate: translate, client: client)
        } catch let error as ParameterError {
            return error.response
        } catch {
            return .openAIError(errors.wire(error))
        }
        let decoder: SpeechFileDecoder
        do {
            decoder = try await open(parameters.file)
        } catch {
            return .openAIError(errors.wire(error), param: "file")
        }
        let run = TranscriptionRun(coordinator: coordinator, client: client, decoder: decoder)
        if parameters.stream { return stream(run, module: module, parameters: parameters) }
        do {
            var (segments, ignored) = try await run.transcribe(module) { _ in }
            ignored.merge(parameters.ignored) { first, _ in first }
            if let dropped = segments.compactMap({ $0.decoding?.promptTokensDropped }).max() {
                ignored["prompt"] = "its first \(dropped) tokens: Whisper takes the last \(DecodingOptions.maxPromptTokens) tokens of a prompt"
            }
            var answered = parameters
            answered.ignored = ignored
            return Self.render(segments, duration: decoder.duration, parameters: answered, translate: translate)
        } catch {
            return .openAIError(errors.wire(error))
        }
    }

    /// `stream=true`: `transcript.text.delta` per final result, then `transcript.text.done`.
    private func stream(_ run: TranscriptionRun, module: TranscriptionRequest, parameters: Parameters) -> HTTPResponse {
        let (events, continuation) = AsyncStream.makeStream(of: Data.self, bufferingPolicy: .bufferingNewest(1024))
        let errors = self.errors
        let work = Task {
            do {
                let (segments, ignored) = try await run.transcribe(module) { segment in
                    continuation.yield(Self.event(["type": "transcript.text.delta", "delta": segment.text + " "]))
                }
                var done: [String: String] = ["type": "transcript.text.done", "text": TranscriptFormatter.text(segments)]
                let all = ignored.merging(parameters.ignored) { first, _ in first }
                if !all.isEmpty { done["earshot_ignored"] = all.keys.sorted().joined(separator: ",") }
                continuation.yield(Self.event(done))
            } catch {
                let wire = errors.wire(error)
                continuation.yield(Self.event(["type": "error", "code": wire.code.rawValue, "message": wire.message]))
            }
            continuation.finish()
        }
        // The client went away: stop decoding and let the coordinator release the session.
        continuation.onTermination = { _ in work.cancel() }
        var response = HTTPResponse.eventStream(events)
        response.headers += Self.ignoredHeaders(parameters.ignored)
        return response
    }

    private static func event(_ fields: [String: String]) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Data("data: ".utf8) + ((try? encoder.encode(fields)) ?? Data("{}".utf8)) + Data("\n\n".utf8)
    }

    /// Writes the upload where libsndfile can read it and opens it (on a dedicated thread).
    private func open(_ file: HTTPFormFile) async throws -> SpeechFileDecoder {
        let path = scratch + "/upload-\(UUID().uuidString)"
        let data = file.data
        return try await BlockingWork.run("earshot.http.upload") {
            guard FileManager.default.createFile(atPath: path, contents: data, attributes: [.posixPermissions: 0o600]) else {
                throw AudioError.unreadable(path: file.filename ?? "file", reason: "could not store the upload")
            }
            defer { unlink(path) }
            do {
                return try SpeechFileDecoder(path: path)
            } catch {
                throw AudioError.unreadable(path: file.filename ?? "file", reason: "not a sound file Earshot can decode (WAV, FLAC, Ogg Vorbis/Opus, MP3, AIFF …)")
            }
        }
    }

    /// The module the `model` field names: an installed asset's id, a kind, or `whisper-1`. A
    /// catalog asset that is not installed is installed for the caller first (its reservation
    /// counts against the caller's quota, as for any client).
    private func resolve(_ parameters: Parameters, translate: Bool, client: AnalysisClient) async throws -> TranscriptionRequest {
        var request = TranscriptionRequest(language: parameters.language, translate: translate, wordTimes: parameters.words, decoding: parameters.decoding)
        switch parameters.model {
        case "whisper-1", "transcriber": request.kind = .transcriber
        case "dictation": request.kind = .dictation
        default:
            let assets = coordinator.assets
            let installed = try await assets.installedAssets().filter(\.current)
            if !installed.contains(where: { $0.entry.id == parameters.model && $0.entry.kind != .detector }) {
                guard let entry = await assets.catalogSummary().assets.first(where: { $0.id == parameters.model && $0.kind != .detector }) else {
                    throw ParameterError(status: 404, message: "The model '\(parameters.model)' does not exist (GET /v1/models lists the installed ones)",
                                         param: "model", code: "model_not_found")
                }
                let locale = parameters.language.flatMap { language in entry.locales.first { LocaleTag($0)?.serves(LocaleTag(language) ?? LocaleTag("und")!) == true } }
                    ?? entry.locales.first
                // Resolution picks among assets by fit, preset and rank: the asset's own preferred
                // preset steers it there when it has one.
                let module = ModuleConfiguration(kind: entry.kind, locale: locale, preset: entry.preferredPresets.first)
                _ = try await assets.install([module], for: ClientIdentity(uid: client.uid, appID: client.appID ?? "http")) { _ in }
                guard try await assets.installedAssets().contains(where: { $0.current && $0.entry.id == entry.id }) else {
                    throw ParameterError(status: 404, message: "'\(entry.id)' is in the catalog but requests for \(locale ?? "its locale") resolve to another asset; an admin can install it (earshotctl install)",
                                         param: "model", code: ErrorCode.notInstalled.rawValue)
                }
            }
            request.name = parameters.model
        }
        if translate, request.kind == .dictation {
            throw ParameterError(status: 400, message: "dictation models do not translate; use a transcriber", param: "model", code: ErrorCode.badRequest.rawValue)
        }
        return request
    }

    /// A bad form field: OpenAI's 400 (or 404 for an unknown model) naming the parameter.
    struct ParameterError: Error {
        var status = 400
        var message: String
        var param: String
        var code: String? = ErrorCode.badRequest.rawValue
        var response: HTTPResponse { .openAIError(status, message, code: code, param: param) }
    }

    static func parameters(_ form: HTTPForm?, translate: Bool) throws(ParameterError) -> Parameters {
        guard let form else { throw ParameterError(message: "the body must be multipart/form-data with a 'file' part", param: "file") }
        guard let file = form.files["file"] else { throw ParameterError(message: "no 'file' part: send the audio as multipart form field 'file'", param: "file") }
        guard !file.data.isEmpty else { throw ParameterError(message: "the uploaded file is empty", param: "file") }
        let formatName = form.value("response_format") ?? "json"
        guard let format = Format(rawValue: formatName) else {
            throw ParameterError(message: "response_format must be one of \(Format.allCases.map(\.rawValue).joined(separator: ", ")), not '\(formatName)'", param: "response_format")
        }
        let granularities = Set(form.values("timestamp_granularities[]") + form.values("timestamp_granularities"))
        if let unknown = granularities.subtracting(["word", "segment"]).first {
            throw ParameterError(message: "timestamp_granularities must be word or segment, not '\(unknown)'", param: "timestamp_granularities[]")
        }
        if !granularities.isEmpty, format != .verboseJSON {
            throw ParameterError(message: "timestamp_granularities needs response_format verbose_json", param: "timestamp_granularities[]")
        }
        let language = form.value("language").flatMap { $0.isEmpty ? nil : LocaleTag($0)?.description ?? $0 }
        if let language, LocaleTag(language) == nil {
            throw ParameterError(message: "language must be a language code such as 'en' or 'pt-BR', not '\(language)'", param: "language")
        }
        if translate, language != nil {
            throw ParameterError(message: "translations take no language: the speech's language is identified and the text is English", param: "language")
        }
        let streamValue = form.value("stream") ?? "false"
        guard ["true", "false"].contains(streamValue) else { throw ParameterError(message: "stream must be true or false", param: "stream") }
        let stream = streamValue == "true"
        if stream, ![.json, .text].contains(format) {
            throw ParameterError(message: "stream=true streams text: use response_format json or text", param: "stream")
        }
        let prompt = form.value("prompt").flatMap { $0.isEmpty ? nil : $0 }
        var temperature: Double?
        if let text = form.value("temperature") {
            guard let value = Double(text), value.isFinite, (0...1).contains(value) else {
                throw ParameterError(message: "temperature must be a number from 0 to 1", param: "temperature")
            }
            temperature = value
        }
        let decoding = DecodingOptions(prompt: prompt, temperature: temperature)
        if let problem = decoding.problem { throw ParameterError(message: problem, param: prompt != nil ? "prompt" : "temperature") }
        return Parameters(file: file, model: form.value("model").flatMap { $0.isEmpty ? nil : $0 } ?? "whisper-1", language: language, format: format,
                          words: granularities.contains("word"), segments: granularities.isEmpty || granularities.contains("segment"),
                          stream: stream, decoding: decoding.isEmpty ? nil : decoding, ignored: [:])
    }

    // MARK: - Response formats

    struct Verbose: Encodable {
        struct Segment: Encodable {
            var id: Int, start: Double, end: Double, text: String
            /// Whisper's measures (absent for PocketSphinx): OpenAI's `seek` (the segment's start in
            /// 10 ms frames), `tokens`, `temperature`, `avg_logprob`, `compression_ratio`, `no_speech_prob`.
            var seek: Int?, tokens: [Int]?, temperature: Double?, avgLogprob: Double?, compressionRatio: Double?, noSpeechProb: Double?
            /// Speech the engine gave no text for (Earshot extension; absent otherwise).
            var speechWithoutText: Bool?
            enum CodingKeys: String, CodingKey {
                case id, seek, start, end, text, tokens, temperature, avgLogprob = "avg_logprob", compressionRatio = "compression_ratio"
                case noSpeechProb = "no_speech_prob", speechWithoutText = "speech_without_text"
            }

            init(id: Int, _ segment: TranscriptSegment) {
                self.id = id
                start = segment.start
                end = segment.end
                text = segment.text
                speechWithoutText = segment.speechWithoutText
                if let decoding = segment.decoding {
                    seek = Int((segment.start * 100).rounded())
                    tokens = decoding.tokens
                    temperature = decoding.temperature
                    avgLogprob = decoding.averageLogProbability
                    compressionRatio = decoding.compressionRatio
                    noSpeechProb = decoding.noSpeechProbability
                }
            }
        }
        struct Word: Encodable { var word: String, start: Double, end: Double }
        var task: String
        var language: String
        /// The identified language's probability, when the language was identified (faster-whisper's field).
        var languageProbability: Double?
        var duration: Double
        var text: String
        var segments: [Segment]?
        var words: [Word]?
        var earshotIgnored: [String: String]?
        enum CodingKeys: String, CodingKey {
            case task, language, languageProbability = "language_probability", duration, text, segments, words, earshotIgnored = "earshot_ignored"
        }
    }

    struct Plain: Encodable {
        var text: String
        var earshotIgnored: [String: String]?
        enum CodingKeys: String, CodingKey { case text, earshotIgnored = "earshot_ignored" }
    }

    static func render(_ segments: [TranscriptSegment], duration: Double, parameters: Parameters, translate: Bool) -> HTTPResponse {
        let headers = ignoredHeaders(parameters.ignored)
        let ignored = parameters.ignored.isEmpty ? nil : parameters.ignored
        switch parameters.format {
        case .json: return .json(Plain(text: TranscriptFormatter.text(segments), earshotIgnored: ignored), headers: headers)
        case .text: return .text(TranscriptFormatter.text(segments) + "\n", headers: headers)
        case .srt: return .text(TranscriptFormatter.srt(segments), headers: headers)
        case .vtt: return HTTPResponse(status: 200, headers: [("Content-Type", "text/vtt; charset=utf-8")] + headers, body: .bytes(Data(TranscriptFormatter.vtt(segments).utf8)))
        case .verboseJSON:
            // Segments with text, and speech that came back without it (flagged, never dropped).
            let spoken = segments.filter { !$0.text.isEmpty || $0.speechWithoutText == true }
            let code = translate ? "en" : (TranscriptFormatter.language(spoken) ?? parameters.language ?? "en")
            let words = spoken.flatMap(\.words).compactMap { word in word.start.flatMap { start in word.end.map { Verbose.Word(word: word.text, start: start, end: $0) } } }
            // The identified language's probability: the mean over the segments that identified it.
            let identified = spoken.compactMap { $0.decoding?.languageProbability }
            return .json(Verbose(task: translate ? "translate" : "transcribe", language: languageName(code),
                                 languageProbability: identified.isEmpty ? nil : identified.reduce(0, +) / Double(identified.count),
                                 duration: duration, text: TranscriptFormatter.text(spoken),
                                 segments: parameters.segments ? spoken.enumerated().map { Verbose.Segment(id: $0.offset, $0.element) } : nil,
                                 words: parameters.words ? words : nil, earshotIgnored: ignored), headers: headers)
        }
    }

    /// OpenAI names languages in English, lowercased (`english`), in `verbose_json`.
    static func languageName(_ code: String) -> String {
        let base = String(code.split(separator: "-").first ?? Substring(code))
        return Locale(identifier: "en_US_POSIX").localizedString(forLanguageCode: base)?.lowercased() ?? code
    }

    static func ignoredHeaders(_ ignored: [String: String]) -> [(name: String, value: String)] {
        ignored.keys.sorted().map { ("X-Earshot-Ignored", "\($0): \(ignored[$0]!)") }
    }
}

/// One upload through one session: feeds the decoded blocks (paced by the session's back-pressure),
/// finishes through the end of input and returns the final segments. Whatever happens — failure,
/// cancellation by a vanished client — the coordinator releases the session.
struct TranscriptionRun: Sendable {
    let coordinator: AnalysisCoordinator
    let client: AnalysisClient
    let decoder: SpeechFileDecoder

    /// The final segments, and what the session's engine did not take of the request (field →
    /// why: a prompt or temperature the model has no use for).
    func transcribe(_ request: TranscriptionRequest, onSegment: @escaping @Sendable (TranscriptSegment) -> Void) async throws
        -> (segments: [TranscriptSegment], ignored: [String: String]) {
        let (events, continuation) = AsyncStream.makeStream(of: AnalysisEvent.self)
        let connection = client.connection
        defer { Task { await coordinator.connectionClosed(connection) } }
        let session = try await coordinator.openTranscription(request, for: client) { _, event in
            continuation.yield(event)
            if case .finished = event { continuation.finish() }
        }
        let ignored = await coordinator.ignoredRequests(of: session)
        let queue = DispatchQueue(label: "earshot.http.decode")
        let decoder = self.decoder
        while let block = try await Self.next(decoder, on: queue) {
            try Task.checkCancellation()
            guard await coordinator.feed(PCMSamples.s16le(block), format: .speech16k, start: nil, session: session, of: connection) else { break }
        }
        try Task.checkCancellation()
        _ = try? await coordinator.control(.finish(.finalizeThroughEndOfInput, time: nil), session: session, of: connection)
        var segments: [TranscriptSegment] = []
        for await event in events {
            switch event {
            case .result(let result) where result.isFinal && !result.text.isEmpty:
                let segment = TranscriptSegment(result)
                segments.append(segment)
                onSegment(segment)
            case .finished(let error?, _):
                throw error
            default:
                break
            }
        }
        return (segments, ignored)
    }

    private static func next(_ decoder: SpeechFileDecoder, on queue: DispatchQueue) async throws -> [Float]? {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try decoder.next() }) }
        }
    }
}
