import EarshotWire
import Foundation
import Testing
import TestSupport

/// The HTTP front (issue 12) against the real daemon and models: `curl --unix-socket` and the
/// unmodified `openai` client from PyPI, every response format, streaming, translation, and the
/// documented status and error shape for bad input.
@Suite(.serialized, .speechDaemon(config: "[HTTP]\nMaxBodyMiB=2\n[Analysis]\nMaxConcurrentAnalyses=1\nMaxQueued=0\n"))
struct HTTPFrontTests {
    static var socket: String { get throws { (try SpeechDaemon.shared().socket as NSString).deletingLastPathComponent + "/http.sock" } }
    static let utterance = SpeechFixtures.ids[0]

    struct Reply {
        var status: Int
        var body: String
        var headers: [String: String]
        var json: [String: Any]? { (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] }
        var error: [String: Any]? { json?["error"] as? [String: Any] }
    }

    /// `curl` with `arguments`; the status, headers (lowercased names) and body.
    static func curl(_ arguments: [String]) async throws -> Reply {
        let daemon = try SpeechDaemon.shared()
        let headers = daemon.directory.file("headers-\(UUID().uuidString)")
        let run = try await ChildProcess.run("/usr/bin/curl", ["-sS", "--unix-socket", try socket, "-D", headers, "-w", "\n%{http_code}"] + arguments, in: daemon.directory)
        var lines = run.stdout.components(separatedBy: "\n")
        let status = Int(lines.removeLast()) ?? 0
        var fields: [String: String] = [:]
        for line in ((try? String(contentsOfFile: headers, encoding: .utf8)) ?? "").components(separatedBy: "\r\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[line[..<colon].lowercased(), default: ""] += (fields[line[..<colon].lowercased()] == nil ? "" : "; ") + line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return Reply(status: status, body: lines.joined(separator: "\n"), headers: fields)
    }

    @Test func curlTranscribesAFileAsJSON() async throws {
        let reply = try await Self.curl(["-F", "file=@\(SpeechFixtures.path(Self.utterance))", "-F", "model=whisper-1", "http://earshot/v1/audio/transcriptions"])
        let text = try #require(reply.json?["text"] as? String, "\(reply)")
        let wer = SpeechFixtures.wer([(try SpeechFixtures.reference(Self.utterance), text)])
        print("[http] json: \(text) (WER \(wer))")
        #expect(reply.status == 200)
        #expect(wer < 0.2, "\(text)")
    }

    @Test func openAIClientWorksInEveryFormatAndStreams() async throws {
        let daemon = try SpeechDaemon.shared()
        let script = SpeechFixtures.projectRoot + "/Tests/python/openai_client_check.py"
        let run = try await ChildProcess.run("/usr/bin/env", ["python3", script, try Self.socket, SpeechFixtures.path(Self.utterance)], in: daemon.directory, timeout: .seconds(300))
        try #require(run.status == 0, "openai client failed: \(run.stderr)")
        let out = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        let reference = try SpeechFixtures.reference(Self.utterance)
        print("[openai] \(run.stdout)")
        #expect((out["models"] as? [String])?.contains("whisper-1") == true)
        #expect((out["models"] as? [String])?.contains("pocketsphinx-en-us") == true)
        for key in ["json", "text"] {
            let text = try #require(out[key] as? String)
            #expect(SpeechFixtures.wer([(reference, text)]) < 0.2, "\(key): \(text)")
        }
        let srt = try #require(out["srt"] as? String)
        #expect(srt.hasPrefix("1\n00:00:0") && srt.contains(" --> "), "\(srt)")
        let vtt = try #require(out["vtt"] as? String)
        #expect(vtt.hasPrefix("WEBVTT\n\n00:00:0"), "\(vtt)")
        let verbose = try #require(out["verbose"] as? [String: Any])
        #expect(verbose["language"] as? String == "english")
        let words = try #require(verbose["words"] as? [[String: Any]])
        #expect(words.count >= 10, "word timestamps in verbose_json: \(words.count)")
        let starts = words.compactMap { $0["start"] as? Double }
        #expect(starts == starts.sorted() && starts.count == words.count, "word starts are present and in order")
        #expect(((verbose["segments"] as? [[String: Any]])?.count ?? 0) >= 1)
        let stream = try #require(out["stream"] as? [String: Any])
        let types = try #require(stream["types"] as? [String])
        #expect(types.first == "transcript.text.delta" && types.last == "transcript.text.done", "\(types)")
        let done = try #require(stream["done"] as? String)
        #expect(SpeechFixtures.wer([(reference, done)]) < 0.2, "\(done)")
        #expect(SpeechFixtures.words(((stream["deltas"] as? [String]) ?? []).joined()) == SpeechFixtures.words(done), "the deltas add up to the full text")
        let translation = try #require(out["translation"] as? String)
        #expect(SpeechFixtures.wer([(reference, translation)]) < 0.3, "English speech translated to English: \(translation)")
        let unknown = try #require(out["unknown_model"] as? [String: Any])
        #expect(unknown["status"] as? Int == 404 && unknown["code"] as? String == "model_not_found")
    }

    /// OpenAI's `prompt` and `temperature` reach Whisper (nothing reported ignored); a prompt
    /// longer than Whisper takes has its dropped front reported; `verbose_json` segments carry
    /// the decoder's measures.
    @Test func promptAndTemperatureAreHonouredAndAPromptsDroppedFrontIsReported() async throws {
        let file = "file=@\(SpeechFixtures.path(Self.utterance))"
        let reply = try await Self.curl(["-F", file, "-F", "prompt=Dashwood", "-F", "temperature=0", "-F", "response_format=verbose_json",
                                         "http://earshot/v1/audio/transcriptions"])
        #expect(reply.status == 200, "\(reply.body)")
        #expect(reply.json?["earshot_ignored"] == nil && reply.headers["x-earshot-ignored"] == nil, "\(reply.body)")
        let segment = try #require((reply.json?["segments"] as? [[String: Any]])?.first, "\(reply.body)")
        for key in ["avg_logprob", "no_speech_prob", "compression_ratio", "temperature", "tokens", "seek"] {
            #expect(segment[key] != nil, "\(key): \(segment)")
        }
        #expect((segment["tokens"] as? [Int])?.isEmpty == false && (segment["avg_logprob"] as? Double ?? 1) < 0)

        let long = Array(repeating: "Dashwood of Norland Park in Sussex", count: 60).joined(separator: ", ")
        let bounded = try await Self.curl(["-F", file, "-F", "prompt=\(long)", "http://earshot/v1/audio/transcriptions"])
        #expect(bounded.status == 200, "\(bounded.body)")
        let ignored = try #require(bounded.json?["earshot_ignored"] as? [String: String], "\(bounded.body)")
        #expect(ignored["prompt"]?.contains("tokens") == true, "\(ignored)")
        #expect(bounded.headers["x-earshot-ignored"]?.contains("prompt") == true, "\(bounded.headers)")

        for (field, value) in [("temperature", "1.5"), ("temperature", "warm"), ("prompt", "a\u{1}b")] {
            let bad = try await Self.curl(["-F", file, "-F", "\(field)=\(value)", "http://earshot/v1/audio/transcriptions"])
            #expect(bad.status == 400 && bad.error?["param"] as? String == field, "\(field)=\(value): \(bad.body)")
        }
    }

    @Test(arguments: [
        ("no file", ["-F", "model=whisper-1"], 400, "file"),
        ("empty file", ["-F", "file=@/dev/null;filename=empty.wav"], 400, "file"),
        ("text file", ["-F", "file=@/etc/os-release;filename=notes.txt"], 415, "file"),
        ("unknown model", ["-F", "model=gpt-9", "-F", "file=@/etc/os-release"], 404, "model"),
        ("bad format", ["-F", "response_format=yaml", "-F", "file=@/etc/os-release"], 400, "response_format"),
    ] as [(String, [String], Int, String)])
    func badInputGetsTheDocumentedStatusAndErrorShape(name: String, form: [String], status: Int, param: String) async throws {
        let reply = try await Self.curl(form + ["http://earshot/v1/audio/transcriptions"])
        print("[http] \(name): \(reply.status) \(reply.body)")
        #expect(reply.status == status, "\(name): \(reply.status) \(reply.body)")
        let error = try #require(reply.error, "\(name): not OpenAI's error shape: \(reply.body)")
        #expect(error["param"] as? String == param)
        #expect(error["message"] is String && error["type"] is String && error["code"] is String)
    }

    @Test func bodyOverTheLimitIs413() async throws {
        let daemon = try SpeechDaemon.shared()
        let big = daemon.directory.file("big.wav")
        try #require(FileManager.default.createFile(atPath: big, contents: Data(count: 3 << 20)))
        let reply = try await Self.curl(["-F", "file=@\(big)", "http://earshot/v1/audio/transcriptions"])
        #expect(reply.status == 413, "\(reply)")
        #expect(reply.error?["code"] as? String == "request_too_large")
    }

    @Test func unknownRouteAndWrongMethod() async throws {
        let missing = try await Self.curl(["http://earshot/v1/chat/completions"])
        #expect(missing.status == 404 && missing.error != nil)
        let wrong = try await Self.curl(["http://earshot/v1/audio/transcriptions"])
        #expect(wrong.status == 405 && wrong.headers["allow"] == "POST", "\(wrong)")
    }

    /// At the admission limit (MaxConcurrentAnalyses=1, one session held open on the socket) a
    /// request gets 429 with Retry-After.
    @Test func requestBeyondTheAdmissionLimitIs429() async throws {
        let daemon = try SpeechDaemon.shared()
        let holder = try TestConnection(daemon.socket)
        defer { holder.close() }
        var session = try await WireSession.opened(holder, [SpeechFixtures.dictation()])
        let reply = try await Self.curl(["-F", "file=@\(SpeechFixtures.path(Self.utterance))", "http://earshot/v1/audio/transcriptions"])
        _ = try await session.finish(timeout: .seconds(60))
        #expect(reply.status == 429, "\(reply)")
        #expect(reply.headers["retry-after"] == "1")
        #expect(reply.error?["code"] as? String == ErrorCode.insufficientResources.rawValue)
    }

    /// German speech: identified as German in `verbose_json`, translated to English by
    /// `/v1/audio/translations`.
    @Test(.enabled(if: SpeechFixtures.multilingualAvailable)) func germanIsIdentifiedAndTranslated() async throws {
        let daemon = try SpeechDaemon.shared()
        let speech = SynthesizedSpeech.german
        let wav = try await speech.wav(in: daemon.directory)
        let transcribed = try await Self.curl(["-F", "file=@\(wav)", "-F", "response_format=verbose_json", "http://earshot/v1/audio/transcriptions"])
        #expect(transcribed.json?["language"] as? String == "german", "\(transcribed.body)")
        let translated = try await Self.curl(["-F", "file=@\(wav)", "http://earshot/v1/audio/translations"])
        let text = try #require(translated.json?["text"] as? String, "\(translated)")
        print("[http] de → \(text)")
        let words = SynthesizedSpeech.words(text)
        #expect(speech.englishWords.filter(words.contains).count >= 2, "\(speech.englishWords) in \(text)")
    }

    /// `/metrics` parses with the Prometheus client library's own parser, and its counters move
    /// with a transcription; `earshotctl stats --json` reports the same counters (one source).
    @Test func metricsParseAndMoveWithATranscription() async throws {
        let daemon = try SpeechDaemon.shared()
        let sum = PrometheusScrape.sum
        let before = try await PrometheusScrape.scrape(try Self.socket, in: daemon.directory)
        let reply = try await Self.curl(["-F", "file=@\(SpeechFixtures.path(Self.utterance))", "http://earshot/v1/audio/transcriptions"])
        #expect(reply.status == 200)
        let after = try await PrometheusScrape.scrape(try Self.socket, in: daemon.directory)
        print("[metrics] \(after.keys.sorted().prefix(40))")
        #expect(sum(after, "earshot_sessions_opened_total") == sum(before, "earshot_sessions_opened_total") + 1)
        #expect(sum(after, "earshot_audio_seconds_total") - sum(before, "earshot_audio_seconds_total") > 7, "7.1 s of audio were analysed")
        #expect(sum(after, "earshot_first_result_seconds_count") > sum(before, "earshot_first_result_seconds_count"))
        let route = #"earshot_http_requests_total{"route": "/v1/audio/transcriptions", "status": "200"}"#
        #expect(after[route, default: 0] == before[route, default: 0] + 1, "\(after.keys.filter { $0.hasPrefix("earshot_http") })")
        #expect(after["earshot_model_loads_total{}", default: 0] >= 1)
        #expect(after[#"earshot_resident_memory_bytes{"kind": "anonymous"}"#, default: 0] > 0)
        #expect(sum(after, "earshot_installed_assets") >= 3)

        // Real-time factor per engine: every decoded segment is one observation, well under real time.
        let rtf = #"earshot_real_time_factor_count{"engine": "sherpa-onnx-whisper"}"#
        let decodes = after[rtf, default: 0] - before[rtf, default: 0]
        #expect(decodes >= 1, "\(after.keys.filter { $0.hasPrefix("earshot_real_time_factor") })")
        let seconds = #"earshot_real_time_factor_sum{"engine": "sherpa-onnx-whisper"}"#
        #expect(after[seconds, default: 0] > before[seconds, default: 0])
        // The suite's installs went through install jobs and downloads; the catalog has a version.
        #expect(after[#"earshot_install_jobs_finished_total{"kind": "install", "result": "succeeded"}"#, default: 0] >= 2)
        #expect(after["earshot_download_bytes_total{}", default: 0] > 0)
        #expect(sum(after, "earshot_catalog_version{") >= 1)
        #expect(sum(after, "earshot_catalog_age_seconds{") >= 0 && after.keys.contains { $0.hasPrefix("earshot_catalog_age_seconds{") })
        #expect(after[#"earshot_verification_failures_total{"check": "hash"}"#] == 0)

        // earshotctl stats reads the same counters.
        let stats = try await ChildProcess.run(BuiltProducts.path("earshotctl"), ["--socket", daemon.socket, "stats", "--json"], in: daemon.directory)
        try #require(stats.status == 0, "\(stats.stderr)")
        let samples = try #require(try JSONDecoder().decode(StatsReply.self, from: Data(stats.stdout.utf8)).metrics)
        func value(_ name: String, _ labels: [String: String] = [:]) -> Double? { samples.first { $0.name == name && $0.labels == labels }?.value }
        #expect(value("earshot_sessions_opened_total", ["engine": "sherpa-onnx-whisper"]) == after[#"earshot_sessions_opened_total{"engine": "sherpa-onnx-whisper"}"#])
        #expect(value("earshot_download_bytes_total") == after["earshot_download_bytes_total{}"])
        #expect(samples.first { $0.name == "earshot_real_time_factor" && $0.labels == ["engine": "sherpa-onnx-whisper"] }?.count == Int(after[rtf] ?? -1))
        let text = try await ChildProcess.run(BuiltProducts.path("earshotctl"), ["--socket", daemon.socket, "stats"], in: daemon.directory)
        #expect(text.stdout.contains("earshot_install_jobs_started_total"), "\(text.stdout)")
    }
}

/// The HTTP front on TCP (`[HTTP] Listen`): a bearer key from the key file is required and names
/// the app; the unmodified `openai` client transcribes with it.
@Suite(.serialized)
struct HTTPTCPTests {
    static let key = "es-test-key-0123456789abcdef"

    @Test func keyRequiredOverTCPAndTheOpenAIClientTranscribes() async throws {
        let port = try LoopbackPort.free()
        let keys = try TempDirectory("eskeys")
        defer { keys.remove() }
        let keyFile = try keys.write("http-keys", "# test keys\n\(Self.key) notes-app\n")
        let daemon = try await SpeechDaemon.start(config: "[HTTP]\nListen=127.0.0.1:\(port)\nKeyFile=\(keyFile)\n", modules: ["dictation"])
        do { try await check(daemon, port: port) } catch { await daemon.cleanUp(); throw error }
        await daemon.cleanUp()
    }

    /// `[HTTP] TCPMetrics`: `key` wants a key even when AllowAnonymous lets anonymous callers
    /// transcribe; `open` serves scrapers without one (other routes still want a key); `off`
    /// never serves it over TCP (403), while the Unix socket still does.
    @Test func metricsOverTCPFollowTCPMetrics() async throws {
        let keys = try TempDirectory("eskeys")
        defer { keys.remove() }
        let keyFile = try keys.write("http-keys", "\(Self.key) scraper\n")
        let auth = ["-H", "Authorization: Bearer \(Self.key)"]
        for (setting, anonymous, expected) in [("key", "yes", ["metrics": "401", "keyed metrics": "200", "models": "200"]),
                                               ("open", "no", ["metrics": "200", "keyed metrics": "200", "models": "401"]),
                                               ("off", "no", ["metrics": "403", "keyed metrics": "403", "models": "401"])] {
            let port = try LoopbackPort.free()
            let daemon = try await TestDaemon(config: "[HTTP]\nListen=127.0.0.1:\(port)\nKeyFile=\(keyFile)\nAllowAnonymous=\(anonymous)\nTCPMetrics=\(setting)\n")
            do {
                for (name, path, headers) in [("metrics", "/metrics", [String]()), ("keyed metrics", "/metrics", auth), ("models", "/v1/models", [])] {
                    let run = try await ChildProcess.run("/usr/bin/curl", ["-sS", "-o", "/dev/null", "-w", "%{http_code}"] + headers + ["http://127.0.0.1:\(port)\(path)"], in: daemon.directory)
                    #expect(run.stdout == expected[name], "TCPMetrics=\(setting): \(name) → \(run.stdout) \(run.stderr)")
                }
                let local = try await ChildProcess.run("/usr/bin/curl", ["-sS", "-o", "/dev/null", "-w", "%{http_code}", "--unix-socket", (daemon.socket as NSString).deletingLastPathComponent + "/http.sock", "http://localhost/metrics"], in: daemon.directory)
                #expect(local.stdout == "200", "TCPMetrics=\(setting): the Unix socket → \(local.stdout) \(local.stderr)")
            } catch { await daemon.cleanUp(); throw error }
            await daemon.cleanUp()
        }
    }

    private func check(_ daemon: TestDaemon, port: UInt16) async throws {
        let url = "http://127.0.0.1:\(port)/v1/models"
        for (name, headers) in [("no key", [String]()), ("wrong key", ["-H", "Authorization: Bearer not-the-key-at-all-000"])] {
            let run = try await ChildProcess.run("/usr/bin/curl", ["-sS", "-o", "/dev/null", "-w", "%{http_code}"] + headers + [url], in: daemon.directory)
            #expect(run.stdout == "401", "\(name): \(run.stdout) \(run.stderr)")
        }
        let script = """
        import sys, openai
        client = openai.OpenAI(api_key=sys.argv[2], base_url=sys.argv[1], max_retries=0)
        with open(sys.argv[3], "rb") as f:
            print(client.audio.transcriptions.create(model="dictation", file=f, response_format="text"))
        """
        let run = try await ChildProcess.run("/usr/bin/env", ["python3", "-c", script, "http://127.0.0.1:\(port)/v1", Self.key, SpeechFixtures.path(SpeechFixtures.ids[0])],
                                             in: daemon.directory, timeout: .seconds(120))
        try #require(run.status == 0, "openai over TCP failed: \(run.stderr)")
        print("[http tcp] \(run.stdout)")
        #expect(SpeechFixtures.wer([(try SpeechFixtures.reference(SpeechFixtures.ids[0]), run.stdout)]) < 0.5, "\(run.stdout)")

        // A catalog model that is not installed is installed for the key's app, then used.
        guard SpeechFixtures.whisperAvailable else { return }
        let auth = ["-H", "Authorization: Bearer \(Self.key)"]
        let first = try await ChildProcess.run("/usr/bin/curl", ["-sS"] + auth + ["-F", "file=@\(SpeechFixtures.path(SpeechFixtures.ids[0]))", "-F", "model=whisper-tiny-en",
                                                                     "http://127.0.0.1:\(port)/v1/audio/transcriptions"], in: daemon.directory, timeout: .seconds(120))
        let text = try #require((try? JSONSerialization.jsonObject(with: Data(first.stdout.utf8)) as? [String: Any])?["text"] as? String, "\(first.stdout) \(first.stderr)")
        #expect(SpeechFixtures.wer([(try SpeechFixtures.reference(SpeechFixtures.ids[0]), text)]) < 0.2, "\(text)")
        let models = try await ChildProcess.run("/usr/bin/curl", ["-sS"] + auth + [url], in: daemon.directory)
        #expect(models.stdout.contains("\"whisper-tiny-en\""), "\(models.stdout)")
    }
}
