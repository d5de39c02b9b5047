import Foundation

/// Contextual strings as a bias on decoding: a trie of each phrase's tokens (as a word inside the
/// text, and as its first word), whose continuations get their logits raised while a hypothesis
/// spells the phrase — a little for a phrase's first token, more for the tokens that complete one
/// already begun, so a rare name the acoustics support wins over a common word that sounds alike.
struct ContextBias: Sendable {
    /// Logit added to the first token of a phrase.
    static let firstTokenBoost: Float = 1.0
    /// Logit added to each token that continues a phrase already begun.
    static let continuationBoost: Float = 3.0

    private var children: [[Int: Int]] = [[:]]
    /// Nodes reached only from the start of the text (a phrase spelled without its leading space).
    private var startOnly: Set<Int> = []
    var root: Int { 0 }

    /// The trie of `phrases` (each tokenised as " phrase" and, at the text's start, "phrase").
    init(phrases: [String], vocabulary: WhisperVocabulary) {
        for phrase in phrases {
            let trimmed = phrase.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !trimmed.isEmpty else { continue }
            insert(vocabulary.encode(" " + trimmed), startOnly: false)
            insert(vocabulary.encode(trimmed), startOnly: true)
        }
    }

    private mutating func insert(_ tokens: [Int], startOnly: Bool) {
        var node = root
        for (index, token) in tokens.enumerated() {
            if let next = children[node][token] {
                node = next
            } else {
                children.append([:])
                children[node][token] = children.count - 1
                node = children.count - 1
                if startOnly && index == 0 { self.startOnly.insert(node) }
            }
        }
    }

    /// Raises the logits of tokens that continue a phrase from any of `states`.
    func boost(_ logits: inout [Float], states: [Int], atStart: Bool) {
        for state in states {
            let amount = state == root ? Self.firstTokenBoost : Self.continuationBoost
            for (token, child) in children[state] where token < logits.count && logits[token] > -.infinity {
                if state == root && !atStart && startOnly.contains(child) { continue }
                logits[token] += amount
            }
        }
    }

    /// The states after `token`: the root, and every state that continues with it.
    func advance(_ states: [Int], with token: Int) -> [Int] {
        var next = [root]
        for state in states {
            if let child = children[state][token], !next.contains(child) { next.append(child) }
        }
        return next
    }
}
