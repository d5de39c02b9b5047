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
    /// have the lowest rank (the leftmost of equals), until no joined pair is a token. The pairs
    /// wait in a heap and the parts form a list, so a pre-token of n bytes takes O(n log n): a
    /// prompt's run of 16384 letters without a space (CJK text, or a hostile client's) is as
    /// quick to encode as its words would be.
    private func merge(_ piece: [UInt8]) -> [Int] {
        guard !piece.isEmpty else { return [] }
        if let whole = ids[piece] { return [whole] }
        // A part is piece[start..<end[start]]; the parts alive are chained by `end` and `before`.
        var end = Array(1...piece.count)
        var before = Array(-1..<(piece.count - 1))
        var alive = [Bool](repeating: true, count: piece.count)
        /// The rank of the part at `start` joined to the one after it, if that is a token.
        func joinedRank(_ start: Int) -> Int? {
            let right = end[start]
            return right < piece.count ? ids[Array(piece[start..<end[right]])] : nil
        }
        var pairs = PairHeap()
        for start in 0..<(piece.count - 1) { if let rank = joinedRank(start) { pairs.push(rank: rank, start: start) } }
        while let (rank, start) = pairs.pop() {
            // Stale when its left part has gone, or it or its right neighbour has grown since.
            guard alive[start], joinedRank(start) == rank else { continue }
            let right = end[start]
            alive[right] = false
            end[start] = end[right]
            if end[start] < piece.count { before[end[start]] = start }
            if let next = joinedRank(start) { pairs.push(rank: next, start: start) }
            if before[start] >= 0, let previous = joinedRank(before[start]) { pairs.push(rank: previous, start: before[start]) }
        }
        var tokens: [Int] = []
        var start = 0
        while start < piece.count {
            if let id = ids[Array(piece[start..<end[start]])] { tokens.append(id) }
            start = end[start]
        }
        return tokens
    }

    /// GPT-2's pre-tokenizer (contractions, letters, numbers, other symbols, white space).
    private static let pretokenizer = try! NSRegularExpression(
        pattern: #"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"#)
}

/// The adjacent pairs of a pre-token's parts by (rank, start), least first: a binary min-heap.
private struct PairHeap {
    private var entries: [(rank: Int, start: Int)] = []

    private static func less(_ a: (rank: Int, start: Int), _ b: (rank: Int, start: Int)) -> Bool {
        a.rank != b.rank ? a.rank < b.rank : a.start < b.start
    }

    mutating func push(rank: Int, start: Int) {
        entries.append((rank, start))
        var child = entries.count - 1
        while child > 0, Self.less(entries[child], entries[(child - 1) / 2]) {
            entries.swapAt(child, (child - 1) / 2)
            child = (child - 1) / 2
        }
    }

    mutating func pop() -> (rank: Int, start: Int)? {
        guard let least = entries.first else { return nil }
        let last = entries.removeLast()
        guard !entries.isEmpty else { return least }
        entries[0] = last
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < entries.count, Self.less(entries[left], entries[smallest]) { smallest = left }
            if right < entries.count, Self.less(entries[right], entries[smallest]) { smallest = right }
            guard smallest != parent else { return least }
            entries.swapAt(parent, smallest)
            parent = smallest
        }
    }
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
