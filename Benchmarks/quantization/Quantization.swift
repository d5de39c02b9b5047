// quantization: the converter's variants of each Whisper model decoded by Earshot's own decoder
// in-process (beam 5, as final results), WER per set beside the float32 reference (issue 29).
//
//     Benchmarks/quantization.sh [--models tiny.en,base] [--sentences N] [--tails F,F,…] [--variants-only V,V,…]
//
// --tails also decodes with the shipped int8 variant appending other tails of silence (feature
// frames; the decoder's default is 1000, 10 s); --variants-only decodes only the variants named
// (fp32, int8, int8-enc8, int8-enc16), so a tail can be measured without the others. quantization.sh converts the variants into --variants DIR/MODEL/{fp32,int8,int8-enc8,int8-enc16}
// and extracts the sonnet into --sonnet DIR.
import EarshotWhisper
import EarshotEngineLink
import EarshotWire
import Foundation
import TestSupport

let say = BenchmarkOutput.say
let fail = BenchmarkOutput.fail

struct Options {
    let variants, sonnet, scratch: String
    let models: [WhisperBenchModel]
    let sentences: Int?
    /// Tails of silence (feature frames) to try on the shipped int8 variant besides the default.
    let tails: [Int]
    /// The variants decoded with the default tail.
    let variantNames: [String]

    init(_ arguments: [String]) {
        let usage = "usage: quantization --variants DIR --sonnet DIR --scratch DIR [--models tiny.en,base] [--sentences N] [--tails F,F,…] [--variants-only V,V,…]"
        let options = BenchmarkOptions(arguments, names: ["variants", "sonnet", "scratch", "models", "sentences", "tails", "variants-only"], flags: [],
                                       required: ["variants", "sonnet", "scratch"], usage: usage)
        (variants, sonnet, scratch) = (options["variants"]!, options["sonnet"]!, options["scratch"]!)
        models = options.models
        sentences = options["sentences"].map { _ in options.positive("sentences", default: 1) }
        tails = (options["tails"] ?? "").split(separator: ",").map { text in
            guard let frames = Int(text), (0...EngineWhisperLoad.maxTailFrames).contains(frames) else { fail(usage) }
            return frames
        }
        let all = ["fp32", "int8", "int8-enc8", "int8-enc16"]
        variantNames = options["variants-only"].map { $0.split(separator: ",").map(String.init) } ?? all
        guard !variantNames.isEmpty, variantNames.allSatisfy(all.contains) else { fail(usage) }
    }
}

@main
enum Quantization {
    static func main() throws {
        let options = Options(CommandLine.arguments)
        let references = try WordErrorRate.librivoxReferences()
        let speech = options.scratch + "/licence-speech"
        try FileManager.default.createDirectory(atPath: speech, withIntermediateDirectories: true)
        let sentences = try EvaluationSets.sentences(in: speech, count: options.sentences ?? Int.max)
        let sets: [(name: String, files: [EvaluationSets.File])] = [
            ("LibriVox utterances", LibriVox.ids.map { EvaluationSets.File(path: LibriVox.path($0), reference: references[$0] ?? "") }),
            ("Sonnet I in parts", try EvaluationSets.sonnetParts(in: options.sonnet)),
            ("Beckett", [try EvaluationSets.readings(in: options.scratch)[1]]),
            ("espeak-ng licence sentences", sentences),
        ]
        let audio = try sets.map { try $0.files.map { try LibriVox.samples($0.path) } }
        say("quantization: Earshot's decoder in-process, beam 5, 2 threads; \(sets.map { "\($0.name) \($0.files.count) files, \($0.files.map { WordErrorRate.words($0.reference).count }.reduce(0, +)) words" }.joined(separator: "; "))")
        for model in options.models {
            say("")
            say("Whisper \(model.name)")
            // The first row's texts (fp32's, unless --variants-only leaves it out), and its label.
            var reference: [[String]]?
            var referenceLabel = ""
            let rows = options.variantNames.map { ($0, EngineWhisperLoad.defaultTailFrames) }
                + options.tails.filter { $0 != EngineWhisperLoad.defaultTailFrames }.map { ("int8", $0) }
            for (variant, tail) in rows {
                let directory = "\(options.variants)/\(model.ct2)/\(variant)"
                let suffix = variant == "fp32" ? "" : ".int8"
                let files = ["\(directory)/\(model.name)-encoder\(suffix).onnx", "\(directory)/\(model.name)-decoder\(suffix).onnx"]
                let bytes = files.compactMap { try? FileManager.default.attributesOfItem(atPath: $0)[.size] as? Int }.reduce(0, +)
                let decoder = try WhisperDecoder(EngineWhisperLoad(id: "", object: variant, encoder: files[0], decoder: files[1],
                                                                   tokens: "\(directory)/\(model.name)-tokens.txt", language: "en", task: "transcribe", threads: 2,
                                                                   tailFrames: tail))
                let start = ContinuousClock.now
                let texts = try audio.map { set in
                    try set.map { try decoder.decode($0, EngineWhisperDecode(id: "", object: variant, sampleRate: 16000, beamSize: 5)).text }
                }
                let seconds = Double((ContinuousClock.now - start).components.seconds) + Double((ContinuousClock.now - start).components.attoseconds) / 1e18
                let label = tail == EngineWhisperLoad.defaultTailFrames ? variant : "\(variant), tail \(tail)"
                var line = label.padding(toLength: 17, withPad: " ", startingAt: 0) + String(format: "%5.0f MB %7.1f s ", Double(bytes) / 1e6, seconds)
                var errors = 0, words = 0, fromReference = 0
                for (index, set) in sets.enumerated() {
                    let pairs = Array(zip(set.files.map(\.reference), texts[index]))
                    let setErrors = pairs.map { WordErrorRate.errors(reference: WordErrorRate.words($0.0), hypothesis: LibriVox.words($0.1)) }.reduce(0, +)
                    let setWords = set.files.map { WordErrorRate.words($0.reference).count }.reduce(0, +)
                    errors += setErrors
                    words += setWords
                    if let reference {
                        fromReference += zip(reference[index], texts[index]).map { WordErrorRate.errors(reference: LibriVox.words($0), hypothesis: LibriVox.words($1)) }.reduce(0, +)
                    }
                    line += String(format: " %@ %d/%d", set.name.split(separator: " ").first.map(String.init) ?? set.name, setErrors, setWords)
                }
                line += String(format: "  all: WER %.2f %% (%d/%d)", Double(errors) / Double(words) * 100, errors, words)
                if reference != nil { line += ", \(fromReference) words from \(referenceLabel)'s text" }
                say("  " + line)
                if reference == nil { (reference, referenceLabel) = (texts, label) }
            }
        }
    }
}
