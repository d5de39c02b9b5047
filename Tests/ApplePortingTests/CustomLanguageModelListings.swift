import Earshot // was: import Speech (and: import Foundation)

// The seeds' datagenerator (000 §11.4), its body in a function because a test target has no
// top-level code; with the build-time phoneme check of §11.3 and the imperative form of §11.4.
// Changed for Earshot: the import line only (and `outputURL` is a parameter).

func datagenerator(outputURL: URL) async throws {
    let locale = Locale(identifier: "en_US")

    let data = SFCustomLanguageModelData(
        locale: locale,
        identifier: "com.example.chess",     // your app's model identifier
        version: "1.0"
    ) {
        // ── Exact phrases ──────────────────────────────────────────────────────
        SFCustomLanguageModelData.PhraseCount(phrase: "Play the Albin counter gambit", count: 10)
        SFCustomLanguageModelData.PhraseCount(phrase: "Play the Winawer variation", count: 10)
        SFCustomLanguageModelData.PhraseCount(phrase: "Play the Tartakower", count: 10)

        // ── Templated expansion: 6 × 2 × 6 × 8 = 576 phrases from one template ─
        SFCustomLanguageModelData.PhraseCountsFromTemplates(classes: [
            "piece": ["pawn", "rook", "knight", "bishop", "queen", "king"],
            "royal": ["queen", "king"],
            "rank": Array(1...8).map({ String($0) })
        ]) {
            SFCustomLanguageModelData.TemplatePhraseCountGenerator.Template(
                "<piece> to <royal> <piece> <rank>",
                count: 10_000
            )
        }

        // ── Pronunciations for words the engine cannot guess ───────────────────
        SFCustomLanguageModelData.CustomPronunciation(grapheme: "Winawer", phonemes: ["w I n aU @r"])
        SFCustomLanguageModelData.CustomPronunciation(grapheme: "Tartakower", phonemes: ["t A r t @ k aU @r"])
    }

    try await data.export(to: outputURL)
    print("Wrote \(outputURL.path)")
}

/// §11.3's build-time check that every X-SAMPA symbol is supported for the locale.
func checkPronunciations(_ myPronunciations: [SFCustomLanguageModelData.CustomPronunciation], locale: Locale) {
    let allowed = Set(SFCustomLanguageModelData.supportedPhonemes(locale: locale))
    for pronunciation in myPronunciations {
        for phonemeString in pronunciation.phonemes {
            for symbol in phonemeString.split(separator: " ") {
                precondition(allowed.contains(String(symbol)),
                             "X-SAMPA symbol '\(symbol)' is not supported for \(locale.identifier).")
            }
        }
    }
}

/// §11.4's imperative form.
func imperativeData(locale: Locale, someGenerator: SFCustomLanguageModelData.PhraseCountGenerator, outputURL: URL) async throws {
    let data = SFCustomLanguageModelData(locale: locale, identifier: "…", version: "1.0")
    data.insert(phraseCount: .init(phrase: "Play the Albin counter gambit", count: 10))
    data.insert(term: .init(grapheme: "Winawer", phonemes: ["w I n aU @r"]))
    data.insert(phraseCountGenerator: someGenerator)
    try await data.export(to: outputURL)
}

// §11.5: the seeds' one function around the two calls they could not verify; the parameter is
// the exported file's URL (Apple's sample reads it from the bundle) and where the handle goes.
// Changed for Earshot: the two lines the seeds left open, filled in as Earshot declares them.

/// Prepares the exported data at `url`; the handle goes to `handle`.
func prepareCustomLanguageModel(exportedAt url: URL, handle: URL) async throws -> SFSpeechLanguageModel.Configuration {
    let configuration = SFSpeechLanguageModel.Configuration(languageModel: handle)
    try await SFSpeechLanguageModel.prepareCustomLanguageModel(for: url, configuration: configuration)
    return configuration
}

// §11.6, verbatim but for the transcriber's construction around it.

/// A dictation transcriber with `preset`'s hints, and the custom language model when there is one.
func dictationTranscriber(locale: Locale, preset: DictationTranscriber.Preset, lmConfiguration: SFSpeechLanguageModel.Configuration?) -> DictationTranscriber {
    let contentHints = if let lmConfiguration {
        preset.contentHints.union([.customizedLanguage(modelConfiguration: lmConfiguration)])
    } else {
        preset.contentHints
    }
    return DictationTranscriber(locale: locale, contentHints: contentHints, transcriptionOptions: preset.transcriptionOptions,
                                reportingOptions: preset.reportingOptions, attributeOptions: preset.attributeOptions)
}
