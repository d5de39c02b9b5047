import EarshotSpeech
import EarshotSystem
import Foundation
import Testing
import TestSupport

/// Real speech through PocketSphinx's US English model. Serialized: each decoder holds ~95 MB and
/// decodes on one core, and the machine is shared.
@Suite(.serialized, .enabled(if: EmbeddedModels.runs(PocketSphinxFixtures.available), "needs Debian pocketsphinx-en-us and pocketsphinx-testdata"))
struct PocketSphinxDecoderTests {
    /// Measured on the five utterances: streamed 31.0 %, whole-utterance 28.2 % (20/71 words;
    /// "mister" in the references is always "mr" here). Ceilings leave a few words of margin.
    static let streamedCeiling = 0.36
    static let wholeCeiling = 0.33

    @Test func librivoxWordErrorRateStaysUnderTheCeiling() async throws {
        let runs = try await PocketSphinxLibrivoxRuns.shared.get()
        #expect(runs.count == 5)
        for run in runs {
            let streamed = WordErrorRate.rate([(run.reference, run.streamed.text)])
            let whole = WordErrorRate.rate([(run.reference, run.whole.text)])
            print(String(format: "pocketsphinx %@ %.2f s: streamed WER %.1f %% (RTF %.3f), whole WER %.1f %% (RTF %.3f)",
                         run.id, run.duration, streamed * 100, run.streamedSeconds / run.duration, whole * 100, run.wholeSeconds / run.duration))
            print("  ref:      \(run.reference)\n  streamed: \(run.streamed.text)\n  whole:    \(run.whole.text)")
        }
        let streamed = WordErrorRate.rate(runs.map { ($0.reference, $0.streamed.text) })
        let whole = WordErrorRate.rate(runs.map { ($0.reference, $0.whole.text) })
        let audio = runs.map(\.duration).reduce(0, +)
        print(String(format: "pocketsphinx total %.1f s: streamed WER %.1f %% RTF %.3f, whole WER %.1f %% RTF %.3f",
                     audio, streamed * 100, runs.map(\.streamedSeconds).reduce(0, +) / audio,
                     whole * 100, runs.map(\.wholeSeconds).reduce(0, +) / audio))
        #expect(streamed <= Self.streamedCeiling)
        #expect(whole <= Self.wholeCeiling)
    }

    @Test func wordTimesAreMonotonicAndInsideTheAudio() async throws {
        for run in try await PocketSphinxLibrivoxRuns.shared.get() {
            for result in [run.streamed, run.whole] {
                let words = result.words
                try #require(!words.isEmpty)
                #expect(words.map(\.text).joined(separator: " ") == result.text)
                var previousEnd = 0.0
                for word in words {
                    let start = try #require(word.start), end = try #require(word.end)
                    #expect(start >= previousEnd - 1e-9 && end > start && end <= run.duration + 1e-9, "\(run.id): \(word)")
                    previousEnd = end
                }
                // Speech starts near the beginning and runs to near the end of each clip.
                #expect(words.first!.start! < 2, "\(run.id) first word at \(words.first!.start!)")
                #expect(words.last!.end! > run.duration - 2, "\(run.id) last word ends at \(words.last!.end!) of \(run.duration)")
                #expect(!words.contains { $0.text.hasPrefix("<") || $0.text.hasPrefix("[") || $0.text.hasSuffix(")") })
            }
        }
    }

    @Test func confidencesAreProbabilities() async throws {
        for run in try await PocketSphinxLibrivoxRuns.shared.get() {
            for result in [run.streamed, run.whole] {
                for word in result.words {
                    let confidence = try #require(word.confidence)
                    #expect((0...1).contains(confidence))
                }
                let confidence = try #require(result.confidence)
                #expect((0...1).contains(confidence))
                // Mean word posterior, not the whole-path posterior (≈0 for sentences this long).
                #expect(confidence > 0.1)
            }
        }
    }

    @Test func alternativesAreDistinctAndNotTheBest() async throws {
        for run in try await PocketSphinxLibrivoxRuns.shared.get() {
            for result in [run.streamed, run.whole] {
                #expect(!result.alternatives.isEmpty)
                #expect(result.alternatives.count <= PocketSphinxLibrivoxRuns.alternatives)
                #expect(!result.alternatives.contains(result.text))
                #expect(Set(result.alternatives).count == result.alternatives.count)
                #expect(!result.alternatives.contains { $0.isEmpty || $0.contains("<") || $0.contains("(") })
            }
        }
    }

    @Test func goForwardTenMeters() async throws {
        let result = try await onPocketSphinxThread {
            let decoder = try PocketSphinxDecoder(model: PocketSphinxFixtures.model())
            return try decoder.decodeUtterance(PocketSphinxFixtures.goForward(), alternatives: 3)
        }
        print("pocketsphinx goforward: " + result.words.map { String(format: "%@ %.2f–%.2f (%.2f)", $0.text, $0.start!, $0.end!, $0.confidence!) }.joined(separator: ", ")
              + String(format: "; utterance %.2f; alternatives %@", result.confidence!, result.alternatives.description))
        let words = Set(WordErrorRate.words(result.text))
        for expected in ["go", "forward", "ten", "meters"] { #expect(words.contains(expected), "\(result.text)") }
        #expect(result.alternatives.count == 3)
    }

    @Test func confidenceOptions() async throws {
        let (path, plain) = try await onPocketSphinxThread {
            let audio = try PocketSphinxFixtures.goForward()
            let path = try PocketSphinxDecoder(model: PocketSphinxFixtures.model(.init(utteranceConfidence: .pathPosterior)))
                .decodeUtterance(audio, alternatives: 2)
            let plain = try PocketSphinxDecoder(model: PocketSphinxFixtures.model(.init(bestPath: false)))
                .decodeUtterance(audio, alternatives: 2)
            return (path, plain)
        }
        // The whole-path posterior is the product of the word posteriors: far below their mean.
        let pathConfidence = try #require(path.confidence)
        let mean = path.words.compactMap(\.confidence).reduce(0, +) / Double(path.words.count)
        #expect(pathConfidence >= 0 && pathConfidence < mean)
        // Without the lattice pass there are no posteriors, but still times and n-best.
        #expect(plain.confidence == nil && plain.words.allSatisfy { $0.confidence == nil && $0.start != nil })
        #expect(plain.alternatives.count == 2 && !plain.alternatives.contains(plain.text))
        print(String(format: "pocketsphinx goforward path posterior %.3f (mean word posterior %.3f); without bestpath: %@", pathConfidence, mean, plain.text))
    }

    @Test func eachUtteranceTimesFromItsOwnStart() async throws {
        let (first, second) = try await onPocketSphinxThread {
            let decoder = try PocketSphinxDecoder(model: PocketSphinxFixtures.model())
            let audio = try PocketSphinxFixtures.goForward()
            var results: [Transcription] = []
            for _ in 0..<2 {
                try decoder.startUtterance()
                try decoder.process(audio)
                results.append(try decoder.endUtterance())
            }
            return (results[0], results[1])
        }
        let duration = Double(try PocketSphinxFixtures.goForward().count) / 16000
        #expect(second.words.map(\.text) == first.words.map(\.text))
        // Same audio, same times: nothing carried over from the earlier utterance.
        for (a, b) in zip(first.words, second.words) {
            #expect(abs(a.start! - b.start!) <= 0.1 && abs(a.end! - b.end!) <= 0.1, "\(a) vs \(b)")
            #expect(b.end! <= duration)
        }
        #expect(first.words.first!.start! < 1)
    }

    @Test func decodersOnTwoThreadsAreIndependent() async throws {
        let model = try PocketSphinxFixtures.model()
        async let one = onPocketSphinxThread { try PocketSphinxDecoder(model: model).decodeUtterance(PocketSphinxFixtures.goForward()) }
        async let two = onPocketSphinxThread { try PocketSphinxDecoder(model: model).decodeUtterance(PocketSphinxFixtures.goForward()) }
        let (a, b) = try await (one, two)
        #expect(a == b)
        #expect(a.text == "go forward ten meters")
    }

    @Test func partialResultsGrowWhileAudioArrives() async throws {
        let (before, partials, final, afterEnd) = try await onPocketSphinxThread {
            let decoder = try PocketSphinxDecoder(model: PocketSphinxFixtures.model())
            let samples = try PocketSphinxFixtures.librivox("sense_and_sensibility_01_austen_64kb-0890")
            let before = decoder.partial()
            try decoder.startUtterance()
            var partials: [Transcription] = []
            for start in stride(from: 0, to: samples.count, by: 4000) {
                try decoder.process(samples[start..<min(start + 4000, samples.count)])
                if let partial = decoder.partial() { partials.append(partial) }
            }
            let final = try decoder.endUtterance()
            return (before, partials, final, decoder.partial())
        }
        #expect(before == nil && afterEnd == nil)
        try #require(partials.count >= 3)
        let counts = partials.map(\.words.count)
        print("pocketsphinx partial word counts: \(counts)")
        #expect(counts.last! > counts.first!)
        #expect(counts.last! >= final.words.count - 2)
        for partial in partials {
            #expect(partial.text == partial.words.map(\.text).joined(separator: " "))
            #expect(partial.words.allSatisfy { $0.start != nil && $0.confidence == nil })
        }
    }

    @Test func callsOutOfOrderAreTypedErrors() async throws {
        let (errors, silent, empty) = try await onPocketSphinxThread {
            let decoder = try PocketSphinxDecoder(model: PocketSphinxFixtures.model())
            var errors: [PocketSphinxError?] = []
            errors.append(pocketSphinxError { try decoder.process([0, 0]) })
            errors.append(pocketSphinxError { try decoder.endUtterance() })
            try decoder.startUtterance()
            errors.append(pocketSphinxError { try decoder.startUtterance() })
            errors.append(pocketSphinxError { try decoder.addWords([("zorbo", "Z AO R B OW")]) })
            // Silence only: an empty result, not an error.
            try decoder.process([Float](repeating: 0, count: 8000))
            let silent = try decoder.endUtterance(alternatives: 3)
            let empty = try decoder.decodeUtterance([Float](), alternatives: 3)
            return (errors, silent, empty)
        }
        #expect(errors == [.noUtterance, .noUtterance, .utteranceInProgress, .utteranceInProgress])
        #expect(silent.words.isEmpty && silent.alternatives.isEmpty && silent.confidence == nil)
        #expect(empty.text.isEmpty && empty.words.isEmpty)
    }

    @Test func addedWordsAreInTheDictionaryAndSearch() async throws {
        let (added, lookups, errors, result) = try await onPocketSphinxThread {
            let decoder = try PocketSphinxDecoder(model: PocketSphinxFixtures.model())
            var lookups = [decoder.pronunciation(of: "zorbo")]
            // A new word sounding like "forward", and a new variant of a known word.
            var added = try decoder.addWords([("zorbo", "F AO R W ER D"), ("forward", "f ao r w er t"), ("forward", "F AO R W ER D")])
            lookups += [decoder.pronunciation(of: "zorbo"), decoder.pronunciation(of: "forward(2)")]
            added += try decoder.addWords([("zorbo", "F  AO R W ER D")]) // already there: nothing to add
            var errors: [PocketSphinxError?] = []
            errors.append(pocketSphinxError { try decoder.addWords([("blap", "B L AE P"), ("blip", "B L XX P")]) })
            lookups.append(decoder.pronunciation(of: "blap")) // nothing added when one entry is bad
            errors.append(pocketSphinxError { try decoder.addWords([("empty", "  ")]) })
            errors.append(pocketSphinxError { try decoder.addWords([("two words", "T UW")]) })
            errors.append(pocketSphinxError { try decoder.addWords([("the(9)", "DH AH")]) })
            let result = try decoder.decodeUtterance(PocketSphinxFixtures.goForward(), alternatives: 20)
            return (added, lookups, errors, result)
        }
        #expect(added == 2)
        #expect(lookups == [nil, "F AO R W ER D", "F AO R W ER T", nil])
        #expect(errors[0] == .invalidPronunciation(word: "blip", phones: "B L XX P", reason: "unknown phone \"XX\""))
        #expect(errors[1] == .invalidPronunciation(word: "empty", phones: "  ", reason: "no phones"))
        if case .invalidWord = errors[2] {} else { Issue.record("two words: \(String(describing: errors[2]))") }
        if case .invalidWord = errors[3] {} else { Issue.record("the(9): \(String(describing: errors[3]))") }
        // The new word competes in the search: it shows up among the hypotheses.
        print("pocketsphinx with zorbo: \(result.text) | \(result.alternatives)")
        #expect(([result.text] + result.alternatives).contains { $0.split(separator: " ").contains("zorbo") })
    }

    @Test func decoderCostsAreMeasured() async throws {
        let (creation, resident) = try await onPocketSphinxThread {
            let model = try PocketSphinxFixtures.model()
            var creation: [Double] = []
            var resident: [Int] = []
            var decoders: [PocketSphinxDecoder] = []
            for _ in 0..<2 {
                let before = ProcessFacts.residentBytes()
                let start = ContinuousClock.now
                decoders.append(try PocketSphinxDecoder(model: model))
                creation.append(PocketSphinxLibrivoxRuns.seconds(ContinuousClock.now - start))
                resident.append(ProcessFacts.residentBytes() - before)
            }
            // Decoding grows the search structures: measure one utterance too.
            let before = ProcessFacts.residentBytes()
            _ = try decoders[0].decodeUtterance(PocketSphinxFixtures.librivox("sense_and_sensibility_01_austen_64kb-0880"))
            resident.append(ProcessFacts.residentBytes() - before)
            return (creation, resident)
        }
        // The first decoder may reuse heap freed by earlier tests; the second shows the real cost.
        print(String(format: "pocketsphinx decoder creation %.3f s, %.3f s; RSS +%.1f MB, +%.1f MB; first decode +%.1f MB",
                     creation[0], creation[1], Double(resident[0]) / 1e6, Double(resident[1]) / 1e6, Double(resident[2]) / 1e6))
        #expect(creation.allSatisfy { $0 < 5 })
        #expect(resident.allSatisfy { $0 < 300_000_000 })
    }
}
