import Earshot // was: import Speech, import AVFoundation

// Contextual strings (000 §"Lever 1 — AnalysisContext.contextualStrings": "create an
// AnalysisContext object and add those words to its contextualStrings property … or set the
// analyzer's context"), on a DictationTranscriber. Changed for Earshot: the import line only.

/// Dictation of `urls`, one after another on one timeline; before the file at `index` the
/// analyzer's context becomes `contexts[index]` (nil: left as it is).
func dictate(_ urls: [URL], with transcriber: DictationTranscriber, contexts: [[String]?]) async throws -> String {
    if let installationRequest = try await AssetInventory.assetInstallationRequest(supporting: [transcriber]) {
        try await installationRequest.downloadAndInstall()
    }
    guard let audioFormat = await SpeechAnalyzer.bestAvailableAudioFormat(compatibleWith: [transcriber]) else {
        throw SpeechSetupError.noCompatibleAudioFormat
    }
    let analyzer = SpeechAnalyzer(modules: [transcriber])
    let (inputSequence, inputBuilder) = AsyncStream.makeStream(of: AnalyzerInput.self)
    let converter = AnalyzerInputConverter(analyzerFormat: audioFormat)

    let printed = Task {
        var text = ""
        for try await result in transcriber.results {
            text += String(result.text.characters) + " "
        }
        return text
    }

    for (index, url) in urls.enumerated() {
        if let strings = contexts[index] {
            let context = AnalysisContext()
            context.contextualStrings[.general] = strings
            try await analyzer.setContext(context)
        }
        if index == 0 {
            try await analyzer.start(inputSequence: inputSequence)
        } else {
            // Everything so far is final before the context changes.
            try await analyzer.finalize(through: nil)
        }
        let file = try AVAudioFile(forReading: url)
        let buffer = AVAudioPCMBuffer(pcmFormat: file.processingFormat, frameCapacity: 4800)!
        while true {
            try file.read(into: buffer)
            if buffer.frameLength == 0 { break }
            for input in try converter.convert(buffer, at: nil) {
                inputBuilder.yield(input)
            }
        }
        for input in try converter.flush() {
            inputBuilder.yield(input)
        }
    }
    inputBuilder.finish()
    try await analyzer.finalizeAndFinishThroughEndOfInput()
    return try await printed.value
}
