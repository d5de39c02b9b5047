import Earshot // was: import Speech, import AVFoundation

// Result merging as the reference shows it: strategy A, range replacement in one attributed
// string (000 §8.6, typed concretely as §8.6's note says it must be), strategy B, two transcripts
// (000 §8.7), and the skill's `LiveTranscript` (002). Changed for Earshot: the imports, and what
// needs SwiftUI is left out — `@Observable` and the volatile text's `foregroundColor` styling.

@MainActor
final class LiveTranscription {
    var transcript = AttributedString()
}

extension LiveTranscription {

    /// Strategy A. Requires `.audioTimeRange` in attributeOptions — see §8.3.
    func merge(_ result: SpeechTranscriber.Result) {
        let resultTranscript = result.text
        let resultTimeRange = result.range

        if let rangeToReplace = transcript.rangeOfAudioTimeRangeAttributes(intersecting: resultTimeRange) {
            transcript.replaceSubrange(rangeToReplace, with: resultTranscript)
        } else {
            transcript.append(resultTranscript)
        }
    }
}

@MainActor
final class TwoTranscriptStore {
    private(set) var finalized = AttributedString()
    private(set) var volatileText = AttributedString()

    /// What you render.
    var displayed: AttributedString { finalized + volatileText }

    func ingest(text: AttributedString, isFinal: Bool) {
        if isFinal {
            finalized += text
            volatileText = AttributedString()
        } else {
            volatileText = text
        }
    }
}

@MainActor
final class LiveTranscript {
    private(set) var settled = AttributedString()
    private(set) var pending = AttributedString()
    private var analyzer: SpeechAnalyzer?
    private var feed: AsyncStream<AnalyzerInput>.Continuation?
    private var reader: Task<Void, Never>?

    func start(locale: Locale) async throws -> AVAudioFormat? {
        let transcriber = SpeechTranscriber(locale: locale, preset: .timeIndexedProgressiveTranscription)
        try await ensureAssets(for: transcriber)
        let analyzer = SpeechAnalyzer(modules: [transcriber])
        let format = await SpeechAnalyzer.bestAvailableAudioFormat(compatibleWith: [transcriber])

        let (inputs, feed) = AsyncStream.makeStream(of: AnalyzerInput.self)
        self.feed = feed
        self.analyzer = analyzer

        reader = Task { [weak self] in
            do {
                for try await piece in transcriber.results {
                    self?.absorb(piece)
                }
            } catch {
                // surface the error in the UI
            }
        }
        try await analyzer.start(inputSequence: inputs)
        return format        // convert microphone buffers to this before yielding
    }

    func push(_ converted: AVAudioPCMBuffer) {
        feed?.yield(AnalyzerInput(buffer: converted))
    }

    func stop() async throws {
        feed?.finish()
        try await analyzer?.finalizeAndFinishThroughEndOfInput()
        await reader?.value
    }

    private func absorb(_ piece: SpeechTranscriber.Result) {
        if piece.isFinal {
            settled.append(piece.text)
            pending = AttributedString()
        } else {
            pending = piece.text
        }
    }
}
