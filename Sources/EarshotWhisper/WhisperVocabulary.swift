import Foundation

/// A Whisper model's tokens: the bytes of each text token (the export's `tokens.txt`, "<base64>
/// <id>" per line) and the special tokens its encoder's metadata names. Encodes text as
/// tiktoken does — GPT-2's pre-tokenizer, then byte-pair merges by rank, a token's rank being its
/// id — so prompts and contextual strings become the tokens the model was trained on.
struct WhisperVocabulary: Sendable {
    let bytes: [[UInt8]]
    private let ids: [[UInt8]: Int]

    let vocabularySize: Int
    let endOfText: Int
    let startOfTranscript: Int
    let startOfPrevious: Int
    let startOfLM: Int
    let noTimestamps: Int
    let noSpeech: Int
    let transcribe: Int
    let translate: Int
    let blank: Int
    let isMultilingual: Bool
    /// Whisper language code → its token, in the model's order.
    let languages: [(code: String, token: Int)]
    /// Tokens OpenAI's decoder suppresses by default (symbols that open sound captions and the like).
    let nonSpeech: [Int]

    /// The metadata keys the encoder must carry.
    static let metadataKeys = [
        "n_vocab", "eot", "sot", "sot_prev", "sot_lm", "no_timestamps", "no_speech", "transcribe", "translate", "blank_id",
        "is_multilingual", "all_language_codes", "all_language_tokens", "non_speech_tokens", "alignment_heads", "n_mels",
        "n_text_layer", "n_text_state", "n_text_ctx", "n_text_head", "version",
    ]

    init(tokensFile: String, metadata: (String) -> String?) throws {
        func number(_ key: String) throws -> Int {
            guard let text = metadata(key), let value = Int(text) else { throw WhisperModelError.badMetadata(key) }
            return value
        }
        func list(_ key: String) -> [String] {
            (metadata(key) ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        }
        vocabularySize = try number("n_vocab")
        endOfText = try number("eot")
        startOfTranscript = try number("sot")
        startOfPrevious = try number("sot_prev")
        startOfLM = try number("sot_lm")
        noTimestamps = try number("no_timestamps")
        noSpeech = try number("no_speech")
        transcribe = try number("transcribe")
        translate = try number("translate")
        blank = (try? number("blank_id")) ?? 220
        isMultilingual = (try number("is_multilingual")) == 1
        let codes = list("all_language_codes"), languageTokens = list("all_language_tokens").compactMap { Int($0) }
        languages = isMultilingual ? zip(codes, languageTokens).map { ($0, $1) } : []
        nonSpeech = list("non_speech_tokens").compactMap { Int($0) }

        guard let text = try? String(contentsOfFile: tokensFile, encoding: .utf8) else { throw WhisperModelError.missingFile(tokensFile) }
        var table = [[UInt8]](repeating: [], count: endOfText)
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            let fields = line.split(separator: " ", omittingEmptySubsequences: false)
            guard let last = fields.last, let id = Int(last), id >= 0, id < endOfText else { continue }
            let encoded = fields.count > 1 ? String(fields[0]) : ""
            table[id] = Data(base64Encoded: encoded).map { [UInt8]($0) } ?? []
        }
        bytes = table
        var ids: [[UInt8]: Int] = [:]
        for (id, piece) in table.enumerated() where !piece.isEmpty && ids[piece] == nil { ids[piece] = id }
        self.ids = ids
    }

    /// The first timestamp token (`<|0.00|>`); every token from it on is a timestamp.
    var firstTimestamp: Int { noTimestamps + 1 }

    /// Whether `token` is text (not a special or timestamp token).
    func isText(_ token: Int) -> Bool { token < endOfText }

    /// The token of a Whisper language code.
    func languageToken(_ code: String) -> Int? { languages.first { $0.code == code }?.token }

    /// The bytes of text tokens as a string (invalid UTF-8 repaired).
    func text(_ tokens: [Int]) -> String {
        String(decoding: tokens.filter(isText).flatMap { bytes[$0] }, as: UTF8.self)
    }

    /// Encodes `text` into tokens.
    func encode(_ text: String) -> [Int] {
        let ns = text as NSString
        return Self.pretokenizer.matches(in: text, range: NSRange(location: 0, length: ns.length)).flatMap { match in
            merge(Array(ns.substring(with: match.range).utf8))
        }
    }

    /// Byte-pair merges of one pre-token: repeatedly join the adjacent pair whose joined bytes
    /// have the lowest rank, until no joined pair is a token.
    private func merge(_ piece: [UInt8]) -> [Int] {
        if let whole = ids[piece] { return [whole] }
        var parts = piece.map { [$0] }
        while parts.count > 1 {
            var best: (rank: Int, index: Int)?
            for index in 0..<(parts.count - 1) {
                if let rank = ids[parts[index] + parts[index + 1]], rank < (best?.rank ?? .max) { best = (rank, index) }
            }
            guard let best else { break }
            parts[best.index] += parts[best.index + 1]
            parts.remove(at: best.index + 1)
        }
        return parts.compactMap { ids[$0] }
    }

    /// GPT-2's pre-tokenizer (contractions, letters, numbers, other symbols, white space).
    private static let pretokenizer = try! NSRegularExpression(
        pattern: #"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"#)
}

/// Why a Whisper model could not be loaded or used.
enum WhisperModelError: Error, CustomStringConvertible {
    case missingFile(String)
    case badMetadata(String)
    case unsupported(String)

    var description: String {
        switch self {
        case .missingFile(let path): "cannot read \(path)"
        case .badMetadata(let key): "the encoder's metadata has no usable \"\(key)\""
        case .unsupported(let what): what
        }
    }
}
