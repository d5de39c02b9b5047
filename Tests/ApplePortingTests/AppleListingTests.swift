import Earshot
import Testing
import TestSupport

/// The Apple-style listings of this target run against a real daemon on LibriVox speech: each
/// installs what it needs through AssetInventory, transcribes, and must keep the last word.
/// Serialized: the listings use the process-wide `EarshotService.shared`.
@Suite(.serialized, .enabled(if: Porting.modelsPresent, "the embedded catalog has no Whisper assets (run Scripts/setup.sh)"), .portingDaemon)
struct AppleListingTests {
    static let english = Locale(identifier: "en_US")

    /// The canonical flow, its AnalyzerInputConverter fed 48 kHz stereo buffers from an
    /// AVAudioFile: the converter's flush keeps the tail, so the last word is there.
    @Test func canonicalFlowConvertsA48kHzStereoFile() async throws {
        try await Porting.useDaemon()
        let directory = try TempDirectory("esport")
        defer { directory.remove() }
        let id = Porting.ids[1] // "he was not an ill disposed young man"
        let lines = try await canonicalFlow(audioFile: try await Porting.stereo48k(id, in: directory), locale: Self.english)
        let text = lines.joined(separator: " ")
        print("[canonical flow] \(text)")
        #expect(WordErrorRate.words(text).last == "man", "\(text)")
        #expect(try Porting.wer(text, ids: [id]) <= 0.35, "\(text)")
    }

    /// File transcription through AVURLAsset and AssetInputSequenceProvider.
    @Test func transcribeFileThroughAssetInputSequenceProvider() async throws {
        try await Porting.useDaemon()
        let id = Porting.ids[0] // "and mister john dashwood had then leisure …" (7 s)
        let text = try await transcribeFile(at: Porting.url(id), locale: Self.english)
        print("[asset provider] \(text)")
        #expect(try Porting.wer(text, ids: [id]) <= 0.35, "\(text)")
    }

    /// Containers people have — an m4a (AAC) and an mp4 video made from the LibriVox WAV by
    /// Debian's `ffmpeg` — transcribe through the same listing as the WAV, FFmpeg decoding them.
    @Test(arguments: [("m4a", false), ("mp4", true)])
    func containersTranscribeLikeTheWav(container: String, video: Bool) async throws {
        try await Porting.useDaemon()
        let directory = try TempDirectory("esport")
        defer { directory.remove() }
        let id = Porting.ids[4]
        let file = try await Porting.encoded(id, as: "speech.\(container)", ["-c:a", "aac", "-b:a", "64k"], video: video, in: directory)
        let text = try await transcribeFile(at: file, locale: Self.english)
        print("[\(container)] \(text)")
        #expect(WordErrorRate.words(text).last == "himself", "\(text)")
        #expect(try Porting.wer(text, ids: [id]) <= 0.35, "\(text)")

        let cli = try await ChildProcess.run(BuiltProducts.path("earshot"), ["--socket", try #require(Porting.daemon).socket, "transcribe", file.path], in: directory, timeout: .seconds(120))
        #expect(cli.status == 0, "\(cli.stderr)")
        #expect(WordErrorRate.words(cli.stdout).last == "himself", "earshot transcribe \(container): \(cli.stdout)")
    }

    /// Regression: every client process (`earshot`, any app linking `Earshot`) loaded FFmpeg's
    /// ~270 shared libraries at start, ~60 ms before main, though only a file libsndfile cannot
    /// read needs them. Now a WAV is transcribed without them and an m4a opens them (glibc's
    /// `LD_DEBUG=files` names every library a process loads, and says how).
    @Test func aClientLoadsFFmpegOnlyWhenAFileNeedsIt() async throws {
        try await Porting.useDaemon()
        let directory = try TempDirectory("esport")
        defer { directory.remove() }
        let id = Porting.ids[1]
        let m4a = try await Porting.encoded(id, as: "speech.m4a", ["-c:a", "aac", "-b:a", "64k"], in: directory)
        let socket = try #require(Porting.daemon).socket
        func transcribe(_ path: String) async throws -> (text: String, loaded: [String]) {
            let run = try await ChildProcess.run(BuiltProducts.path("earshot"), ["--socket", socket, "transcribe", path],
                                                 environment: ["LD_DEBUG": "files"], in: directory, timeout: .seconds(120))
            #expect(run.status == 0, "\(run.stderr.suffix(2000))")
            let loaded = run.stderr.split(separator: "\n").filter { $0.contains("file=libav") && $0.contains("[0];") }.map(String.init)
            return (run.stdout, loaded)
        }
        let wav = try await transcribe(Porting.url(id).path)
        #expect(try Porting.wer(wav.text, ids: [id]) <= 0.35, "\(wav.text)")
        #expect(wav.loaded.isEmpty, "a WAV loaded FFmpeg: \(wav.loaded)")
        let aac = try await transcribe(m4a.path)
        #expect(try Porting.wer(aac.text, ids: [id]) <= 0.35, "\(aac.text)")
        #expect(aac.loaded.contains { $0.contains("file=libavformat.so.") && $0.contains("dynamically loaded") }, "\(aac.loaded)")
    }

    /// Regression: `earshot transcribe` of a file that does not exist loaded FFmpeg's libraries to
    /// try it a second time after libsndfile failed (70 ms instead of 30 for the error), and said
    /// "System error : No such file or directory.". Now the system's reason comes at once.
    @Test func aMissingFileIsReportedWithoutLoadingFFmpeg() async throws {
        try await expectRefusedWithoutFFmpeg("missing.wav", reason: "No such file or directory") { _ in }
    }

    /// Regression: `earshot transcribe DIRECTORY` opened the directory, let libsndfile and then
    /// FFmpeg (loaded for it) try it, and said "Format not recognised". Now it says it is a
    /// directory, at once.
    @Test func aDirectoryIsReportedAsOneWithoutLoadingFFmpeg() async throws {
        try await expectRefusedWithoutFFmpeg("recordings.wav", reason: "Is a directory") {
            try FileManager.default.createDirectory(atPath: $0, withIntermediateDirectories: false)
        }
    }

    /// `earshot transcribe PATH` and `AVAudioFile(forReading:)` refuse `name` (made by `make` in a
    /// fresh directory) with the system's `reason`, and the CLI never loads FFmpeg for it.
    private func expectRefusedWithoutFFmpeg(_ name: String, reason: String, make: (String) throws -> Void) async throws {
        try await Porting.useDaemon()
        let directory = try TempDirectory("esport")
        defer { directory.remove() }
        let path = directory.file(name)
        try make(path)
        let run = try await ChildProcess.run(BuiltProducts.path("earshot"), ["--socket", try #require(Porting.daemon).socket, "transcribe", path],
                                             environment: ["LD_DEBUG": "files"], in: directory, timeout: .seconds(60))
        #expect(run.status == 1)
        #expect(run.stderr.contains("\(path): cannot read audio from \(path): \(reason)"), "\(run.stderr.suffix(2000))")
        #expect(!run.stderr.contains("file=libavformat"), "\(name) loaded FFmpeg")
        let error = #expect(throws: (any Error).self) { try AVAudioFile(forReading: URL(fileURLWithPath: path)) }
        #expect(error.map { "\($0)" } == "cannot read audio from \(path): \(reason)")
    }

    /// A video with no audio track is refused with a message saying so — by AVAudioFile, the
    /// asset provider and `earshot transcribe` — instead of transcribing silence.
    @Test func videoWithoutAudioIsRefusedClearly() async throws {
        try await Porting.useDaemon()
        let directory = try TempDirectory("esport")
        defer { directory.remove() }
        let path = directory.file("silent-film.mp4")
        let made = try await ChildProcess.run("/usr/bin/ffmpeg", ["-loglevel", "error", "-f", "lavfi", "-i", "color=c=black:s=64x64:d=1", "-c:v", "mpeg4", path], in: directory)
        try #require(made.status == 0, "ffmpeg: \(made.stderr)")
        let url = URL(fileURLWithPath: path)
        #expect { _ = try AVAudioFile(forReading: url) } throws: { "\($0)".contains("no audio stream") }
        await #expect { _ = try await transcribeFile(at: url, locale: Self.english) } throws: { "\($0)".contains("no audio stream") }
        let cli = try await ChildProcess.run(BuiltProducts.path("earshot"), ["--socket", try #require(Porting.daemon).socket, "transcribe", path], in: directory)
        #expect(cli.status == 1)
        #expect(cli.stderr.contains("no audio stream"), "\(cli.stderr)")
    }

    /// `analyzeSequence(from: AVAudioFile)`: the analyzer converts the file's format itself (a
    /// 48 kHz stereo file here) and the last word survives.
    @Test func transcriptOfAnAudioFile() async throws {
        try await Porting.useDaemon()
        let directory = try TempDirectory("esport")
        defer { directory.remove() }
        let id = Porting.ids[4] // "he might even have been made amiable himself"
        let text = String(try await transcript(of: try await Porting.stereo48k(id, in: directory), locale: Self.english).characters)
        print("[analyzeSequence(from:)] \(text)")
        #expect(WordErrorRate.words(text).last == "himself", "\(text)")
        #expect(try Porting.wer(text, ids: [id]) <= 0.35, "\(text)")
    }

    /// Linux extension: an `AVAudioFile` is a whole recording, so Whisper decodes consecutive
    /// utterances together (fewer decodes than results, one final result per utterance, in
    /// order); the same audio as a plain sequence is live input, one decode per utterance.
    @Test func anAudioFileIsDecodedAsARecordingAndASequenceAsLiveInput() async throws {
        try await Porting.useDaemon()
        let socket = try #require(Porting.daemon).socket
        let directory = try TempDirectory("esrec")
        defer { directory.remove() }
        let path = directory.file("five.wav")
        _ = try LibriVox.writeRecording(to: path, repeats: 1, silence: 1)
        func decodes() async throws -> Int {
            try await TestConnection.stats(of: socket).metrics?.first { $0.name == "earshot_real_time_factor" && $0.labels == ["engine": "sherpa-onnx-whisper"] }?.count ?? 0
        }
        var figures: [(decodes: Int, finals: Int, text: String)] = []
        for recording in [true, false] {
            let transcriber = SpeechTranscriber(locale: Self.english, preset: .transcription)
            try await ensureAssets(for: transcriber)
            let before = try await decodes()
            let analyzer = SpeechAnalyzer(modules: [transcriber])
            async let collected = transcriber.results.reduce(into: [String]()) { $0.append(String($1.text.characters)) }
            let url = URL(fileURLWithPath: path)
            let last = recording ? try await analyzer.analyzeSequence(from: try AVAudioFile(forReading: url))
                : try await analyzer.analyzeSequence(try await AssetInputSequenceProvider.provider(from: AVURLAsset(url: url), compatibleWith: [transcriber]).analyzerInputs)
            try await analyzer.finalizeAndFinish(through: try #require(last))
            let finals = try await collected
            figures.append((try await decodes() - before, finals.count, finals.joined(separator: " ")))
        }
        print("[recording vs live] decodes, final results: \(figures.map { ($0.decodes, $0.finals) })")
        #expect(figures[0].finals == 5 && figures[1].finals == 5, "one final result per utterance: \(figures.map(\.finals))")
        #expect(figures[0].decodes < figures[0].finals, "the recording's utterances decode together")
        #expect(figures[1].decodes == figures[1].finals, "live input decodes each utterance")
        for figure in figures { #expect(try Porting.wer(figure.text, ids: Porting.ids) <= 0.05, "\(figure.text)") }
    }

    /// The file-taking initializer with `finishAfterFile`: results end without any finish call.
    @Test func fileInitializerFinishesAfterTheFile() async throws {
        try await Porting.useDaemon()
        let id = Porting.ids[4]
        let transcriber = SpeechTranscriber(locale: Self.english, preset: .transcription)
        try await ensureAssets(for: transcriber)
        async let collected = transcriber.results.reduce(into: "") { text, result in text += String(result.text.characters) }
        let file = try AVAudioFile(forReading: Porting.url(id))
        _ = try await SpeechAnalyzer(inputAudioFile: file, modules: [transcriber], finishAfterFile: true)
        let text = try await collected
        #expect(WordErrorRate.words(text).last == "himself", "\(text)")
    }

    /// The sample's asset ladder and the checked locale switch: install, reserve, refuse what no
    /// engine serves, release.
    @Test func reservationLadder() async throws {
        try await Porting.useDaemon(appID: "com.example.porting.ladder")
        let transcription = Transcription()
        let locale = try #require(await SpeechTranscriber.supportedLocale(equivalentTo: Self.english))
        try await transcription.ensureModel(transcriber: SpeechTranscriber(locale: locale, preset: .transcription), locale: locale)
        #expect(await transcription.installed(locale: locale))
        if let progress = transcription.downloadProgress { #expect(progress.fractionCompleted == 1) }

        await #expect(throws: TranscriptionSetupError.self) {
            try await switchLocale(to: Locale(identifier: "tlh"), currentlyReserved: nil)
        }
        try await switchLocale(to: Self.english, currentlyReserved: nil)
        let dictation = DictationTranscriber(locale: Self.english, preset: .progressiveLongDictation)
        #expect(await AssetInventory.status(forModules: [dictation]) == .installed)
        let reserved = await AssetInventory.reservedLocales
        #expect(!reserved.isEmpty)
        #expect(AssetInventory.maximumReservedLocales >= reserved.count)

        await transcription.releaseLocales()
        #expect(await AssetInventory.reservedLocales.isEmpty)
    }

    /// Regression: `installedLocales` listed only the catalog's language (`en`) while
    /// `supportedLocale(equivalentTo:)` answered `en-US`, so the sample's BCP-47 check
    /// (`installed(locale:)`) said "not installed" for installed assets.
    @Test func installedLocalesIncludeTheEquivalentOfAnInstalledLanguage() async throws {
        try await Porting.useDaemon()
        let locale = try #require(await SpeechTranscriber.supportedLocale(equivalentTo: Self.english))
        try await ensureAssets(for: SpeechTranscriber(locale: locale, preset: .transcription))
        let installed = await SpeechTranscriber.installedLocales.map { $0.identifier(.bcp47) }
        #expect(installed.contains(locale.identifier(.bcp47)), "\(locale.identifier) in \(installed)")
        #expect(await SpeechTranscriber.supportedLocales.count >= installed.count)
    }

    /// Strategy A (range replacement) and strategy B (two transcripts) over one progressive
    /// session fed at the pace of speech: both end with the same words, and A did not degrade
    /// to appending every volatile revision.
    @MainActor
    @Test func strategiesAAndBAgree() async throws {
        try await Porting.useDaemon()
        let id = Porting.ids[0]
        let preset = SpeechTranscriber.Preset.progressiveTranscription
        let transcriber = SpeechTranscriber(locale: Self.english, transcriptionOptions: preset.transcriptionOptions,
                                            reportingOptions: preset.reportingOptions, attributeOptions: preset.attributeOptions.union([.audioTimeRange]))
        try await ensureAssets(for: transcriber)
        let format = try #require(await SpeechAnalyzer.bestAvailableAudioFormat(compatibleWith: [transcriber]))
        let converter = AnalyzerInputConverter(analyzerFormat: format)
        let file = try AVAudioFile(forReading: Porting.url(id))
        let (inputs, feed) = AsyncStream.makeStream(of: AnalyzerInput.self)
        let paced = Task.detached {
            let buffer = AVAudioPCMBuffer(pcmFormat: file.processingFormat, frameCapacity: 4000)!
            while true {
                try file.read(into: buffer)
                if buffer.frameLength == 0 { break }
                for input in try converter.convert(buffer, at: nil) { feed.yield(input) }
                try await Task.sleep(for: .milliseconds(250))
            }
            for input in try converter.flush() { feed.yield(input) }
            feed.finish()
        }
        let a = LiveTranscription()
        let b = TwoTranscriptStore()
        let analyzer = SpeechAnalyzer(modules: [transcriber])
        let merging = Task { @MainActor in
            var volatile = 0
            for try await result in transcriber.results {
                if !result.isFinal { volatile += 1 }
                a.merge(result)
                b.ingest(text: result.text, isFinal: result.isFinal)
            }
            return volatile
        }
        if let last = try await analyzer.analyzeSequence(inputs) {
            try await analyzer.finalizeAndFinish(through: last)
        } else {
            await analyzer.cancelAndFinishNow()
        }
        try await paced.value
        let volatile = try await merging.value
        let textA = String(a.transcript.characters), textB = String(b.displayed.characters)
        print("[strategy A] \(textA)\n[strategy B] \(textB) (\(volatile) volatile results)")
        #expect(volatile > 0, "a progressive preset fed at the pace of speech gives volatile results")
        #expect(WordErrorRate.words(textA) == WordErrorRate.words(textB))
        #expect(try Porting.wer(textB, ids: [id]) <= 0.35, "\(textB)")
    }

    /// The skill's LiveTranscript: `start(inputSequence:)`, buffers converted with
    /// AVAudioConverter to the analyzer's format, `finalizeAndFinishThroughEndOfInput()`.
    @MainActor
    @Test func liveTranscriptWithAVAudioConverter() async throws {
        try await Porting.useDaemon()
        let id = Porting.ids[4]
        let live = LiveTranscript()
        let format = try #require(try await live.start(locale: Self.english))
        let file = try AVAudioFile(forReading: Porting.url(id))
        let converter = try #require(AVAudioConverter(from: file.processingFormat, to: format))
        let buffer = AVAudioPCMBuffer(pcmFormat: file.processingFormat, frameCapacity: 1600)!
        while true {
            try file.read(into: buffer)
            if buffer.frameLength == 0 { break }
            let converted = AVAudioPCMBuffer(pcmFormat: format, frameCapacity: buffer.frameLength)!
            try converter.convert(to: converted, from: buffer)
            live.push(converted)
        }
        try await live.stop()
        let text = String(live.settled.characters)
        print("[LiveTranscript] \(text)")
        #expect(WordErrorRate.words(text).last == "himself", "\(text)")
        #expect(live.pending.characters.isEmpty)
    }
}
