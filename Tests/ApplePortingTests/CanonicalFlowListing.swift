import Earshot // was: import Speech, import AVFoundation

// Apple's canonical flow (SpeechAnalyzer documentation, eight steps), as printed, with the two
// "/* audio */" placeholders filled with AVFoundation code reading a file. Changed for Earshot:
// the import line only. (The step-7 task collects the lines it would print, so a test can read
// them.)

enum SpeechSetupError: Error {
    case unsupportedLocale
    case noCompatibleAudioFormat
}

func canonicalFlow(audioFile url: URL, locale requested: Locale) async throws -> [String] {
    // Step 1: Modules
    guard let locale = await SpeechTranscriber.supportedLocale(equivalentTo: requested) else {
        throw SpeechSetupError.unsupportedLocale
    }
    let transcriber = SpeechTranscriber(locale: locale, preset: .transcription)

    // Step 2: Assets
    if let installationRequest = try await AssetInventory.assetInstallationRequest(supporting: [transcriber]) {
        try await installationRequest.downloadAndInstall()
    }

    // Step 3: Input sequence
    let (inputSequence, inputBuilder) = AsyncStream.makeStream(of: AnalyzerInput.self)

    // Step 4: Analyzer
    guard let audioFormat = await SpeechAnalyzer.bestAvailableAudioFormat(compatibleWith: [transcriber]) else {
        throw SpeechSetupError.noCompatibleAudioFormat
    }
    let analyzer = SpeechAnalyzer(modules: [transcriber])

    // Step 5: Supply audio
    let converter = AnalyzerInputConverter(analyzerFormat: audioFormat)
    let file = try AVAudioFile(forReading: url)
    let supplier = Task {
        let buffer = AVAudioPCMBuffer(pcmFormat: file.processingFormat, frameCapacity: 4800)!
        while true /* audio remains */ {
            try file.read(into: buffer) /* Get some audio */
            if buffer.frameLength == 0 { break }
            let inputs = try converter.convert(buffer, at: nil)
            for input in inputs {
                inputBuilder.yield(input)
            }
        }
        let inputs = try converter.flush()
        for input in inputs {
            inputBuilder.yield(input)
        }
        inputBuilder.finish()
    }

    // Step 7: Act on results
    let printed = Task {
        var lines: [String] = []
        for try await result in transcriber.results {
            let bestTranscription = result.text // an AttributedString
            let plainTextBestTranscription = String(bestTranscription.characters) // a String
            lines.append(plainTextBestTranscription)
        }
        return lines
    }

    // Step 6: Perform analysis
    let lastSampleTime = try await analyzer.analyzeSequence(inputSequence)

    // Step 8: Finish analysis
    if let lastSampleTime {
        try await analyzer.finalizeAndFinish(through: lastSampleTime)
    } else {
        await analyzer.cancelAndFinishNow()
    }
    try await supplier.value
    return try await printed.value
}
