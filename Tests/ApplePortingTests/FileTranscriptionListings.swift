import Earshot // was: import Speech, import AVFoundation

// File transcription as the reference shows it: the guide's `transcribeFile(at:locale:)` through
// AssetInputSequenceProvider (000 §6.5) and the skill's `makeModule(for:)`, `ensureAssets(for:)`
// and `transcript(of:locale:)` (002). Changed for Earshot: the imports; in `transcribeFile`, the
// results loop returns its text from its own task instead of appending to a captured `var`
// (Swift 6 rejects that mutation from a concurrently running child task on every platform).

enum TranscriptionError: Error {
    case localeNotSupported(Locale)
    case noTranscriberAvailable
    case couldNotCaptureMicrophone
}

func transcribeFile(at url: URL, locale: Locale = .current) async throws -> String {
    guard let matched = await SpeechTranscriber.supportedLocale(equivalentTo: locale) else {
        throw TranscriptionError.localeNotSupported(locale)
    }

    // For batch work you want accuracy, not immediacy: no volatile results to merge.
    let transcriber = SpeechTranscriber(locale: matched, preset: .transcription)
    let modules: [any SpeechModule] = [transcriber]

    if let request = try await AssetInventory.assetInstallationRequest(supporting: modules) {
        try await request.downloadAndInstall()
    }

    let asset = AVURLAsset(url: url)
    let provider = try await AssetInputSequenceProvider.provider(
        from: asset,
        compatibleWith: modules
    )

    let analyzer = SpeechAnalyzer(modules: modules)

    let collected = Task {
        var text = AttributedString()
        // With `.transcription` there are no volatile results, so every result is final
        // and append-only.
        for try await result in transcriber.results {
            text.append(result.text)
        }
        return text
    }

    try await withThrowingDiscardingTaskGroup { group in
        group.addTask {
            let lastAudioTime = try await analyzer.analyzeSequence(provider.analyzerInputs)
            if let lastAudioTime {
                try await analyzer.finalizeAndFinish(through: lastAudioTime)
            } else {
                await analyzer.cancelAndFinishNow()
            }
        }
    }

    return String(try await collected.value.characters)
}

func makeModule(for locale: Locale) async -> (any SpeechModule)? {
    if SpeechTranscriber.isAvailable,
       let matched = await SpeechTranscriber.supportedLocale(equivalentTo: locale) {
        return SpeechTranscriber(locale: matched, preset: .progressiveTranscription)
    }
    if let matched = await DictationTranscriber.supportedLocale(equivalentTo: locale) {
        return DictationTranscriber(locale: matched, preset: .progressiveLongDictation)
    }
    return nil        // disable the feature for this device and locale
}

func ensureAssets(for transcriber: SpeechTranscriber) async throws {
    if let install = try await AssetInventory.assetInstallationRequest(supporting: [transcriber]) {
        try await install.downloadAndInstall()
    }
}

func transcript(of recording: URL, locale: Locale) async throws -> AttributedString {
    guard let matched = await SpeechTranscriber.supportedLocale(equivalentTo: locale) else {
        throw CocoaError(.featureUnsupported)
    }
    let transcriber = SpeechTranscriber(locale: matched, preset: .transcription)
    try await ensureAssets(for: transcriber)

    let analyzer = SpeechAnalyzer(modules: [transcriber])
    async let collected = transcriber.results.reduce(into: AttributedString()) { text, piece in
        text.append(piece.text)
    }

    let audio = try AVAudioFile(forReading: recording)
    if let lastSample = try await analyzer.analyzeSequence(from: audio) {
        try await analyzer.finalizeAndFinish(through: lastSample)
    } else {
        await analyzer.cancelAndFinishNow()
    }
    return try await collected
}
