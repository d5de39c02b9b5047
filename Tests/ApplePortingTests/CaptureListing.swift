import Earshot // was: import Speech, import AVFoundation

// Microphone capture as the 2026 article sets it up (000 §6.2): the default microphone through
// CaptureInputSequenceProvider.providerWithSession(from:compatibleWith:), analysed until the app
// stops the capture session, then finalized. Changed for Earshot: the imports. (The article's
// UI — a stop button — is the `stop` closure here.)

func transcribeMicrophone(locale: Locale, until stop: @escaping @Sendable () async -> Void) async throws -> String {
    let transcriber = SpeechTranscriber(locale: locale, preset: .progressiveTranscription)
    let modules: [any SpeechModule] = [transcriber]
    if let request = try await AssetInventory.assetInstallationRequest(supporting: modules) {
        try await request.downloadAndInstall()
    }

    guard let captureDevice = AVCaptureDevice.default(.microphone, for: .audio, position: .unspecified) else {
        throw TranscriptionError.couldNotCaptureMicrophone
    }

    let provider = try await CaptureInputSequenceProvider.providerWithSession(from: captureDevice, compatibleWith: modules)

    let analyzer = SpeechAnalyzer(modules: modules)
    let collected = Task {
        var finalized = AttributedString()
        for try await result in transcriber.results where result.isFinal {
            finalized.append(result.text)
        }
        return finalized
    }
    let stopButton = Task {
        await stop()
        provider.captureSession.stopRunning()
    }

    let lastSampleTime = try await analyzer.analyzeSequence(provider.analyzerInputs)
    if let lastSampleTime {
        try await analyzer.finalizeAndFinish(through: lastSampleTime)
    } else {
        await analyzer.cancelAndFinishNow()
    }
    await stopButton.value
    return String(try await collected.value.characters)
}
