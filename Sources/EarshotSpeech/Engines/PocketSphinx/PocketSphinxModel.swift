import Foundation

/// A PocketSphinx model on disk: acoustic model directory, language model and pronunciation
/// dictionary, plus decoder options. Validated at creation. It holds no decoder (PocketSphinx
/// decoders cannot be shared between sessions: make one `PocketSphinxDecoder` per session), only
/// the decoder arguments and the acoustic model's phone set, computed once.
public struct PocketSphinxModel: Sendable, Hashable {
    /// The model files, as named in errors.
    public enum File: String, Sendable, Hashable {
        case acousticModel = "acoustic model"
        case languageModel = "language model"
        case dictionary
    }

    /// How `Transcription.confidence` is derived for a finished utterance.
    public enum UtteranceConfidence: Sendable, Hashable {
        /// Mean of the words' lattice posteriors (useful at any utterance length).
        case meanWordPosterior
        /// Posterior of the whole best path (`ps_get_prob`): the product of every word's
        /// posterior, so it falls towards 0 as utterances grow (≈0 beyond a few seconds).
        case pathPosterior
    }

    /// Decoder options.
    public struct Options: Sendable, Hashable {
        /// Lattice best-path pass (`-bestpath`). Word and utterance posteriors (confidences) exist
        /// only with it; without it confidences are `nil`.
        public var bestPath: Bool
        /// How the utterance confidence is computed.
        public var utteranceConfidence: UtteranceConfidence
        /// Most n-best hypotheses examined per utterance when collecting alternatives (many are
        /// duplicates differing only in fillers or pronunciation variants).
        public var nBestSearchLimit: Int
        /// Further decoder arguments by name (`["-beam": "1e-60", "-lw": "7.0"]`), for tuning.
        /// Arguments the model sets itself (`-hmm`, `-lm`, `-dict`, `-samprate`, `-remove_silence`,
        /// `-bestpath`, `-logfn`) are refused. A bad value makes PocketSphinx print its whole
        /// argument table to stderr before `configurationRejected`.
        public var additionalArguments: [String: String]

        /// Defaults: best-path lattice on, mean word posterior, 200 n-best hypotheses examined.
        public init(
            bestPath: Bool = true,
            utteranceConfidence: UtteranceConfidence = .meanWordPosterior,
            nBestSearchLimit: Int = 200,
            additionalArguments: [String: String] = [:]
        ) {
            self.bestPath = bestPath
            self.utteranceConfidence = utteranceConfidence
            self.nBestSearchLimit = nBestSearchLimit
            self.additionalArguments = additionalArguments
        }
    }

    /// The only sample rate the decoder accepts (the US English acoustic model is 16 kHz).
    public static let sampleRate = 16_000

    /// Directory with `mdef`, `means`, `variances`, `transition_matrices` and `sendump` or
    /// `mixture_weights` (and usually `feat.params`, `noisedict`).
    public let acousticModel: String
    /// N-gram language model (ARPA or binary).
    public let languageModel: String
    /// Pronunciation dictionary.
    public let dictionary: String
    /// Decoder options, as given.
    public let options: Options
    /// Decoder arguments without the program name, in the order given to `cmd_ln_parse_r`.
    public let arguments: [String]
    /// The acoustic model's context-independent phones (from `mdef`), or `nil` when its format
    /// was not understood (then pronunciations are checked by PocketSphinx alone).
    public let phones: Set<String>?

    static let reservedArguments: Set<String> = ["-hmm", "-lm", "-dict", "-samprate", "-remove_silence", "-bestpath", "-logfn"]

    /// A model from its three paths. Throws `missingModelFile` naming the first missing file.
    public init(acousticModel: String, languageModel: String, dictionary: String, options: Options = Options()) throws(PocketSphinxError) {
        self.acousticModel = acousticModel
        self.languageModel = languageModel
        self.dictionary = dictionary
        self.options = options
        try Self.validateFiles(acousticModel: acousticModel, languageModel: languageModel, dictionary: dictionary)
        guard options.nBestSearchLimit > 0 else { throw .invalidOption("nBestSearchLimit must be positive") }
        var arguments = [
            "-hmm", acousticModel,
            "-lm", languageModel,
            "-dict", dictionary,
            "-samprate", String(Self.sampleRate),
            // Keep every frame: PocketSphinx's own VAD drops silence frames and shifts word times.
            "-remove_silence", "no",
            "-bestpath", options.bestPath ? "yes" : "no",
        ]
        for (name, value) in options.additionalArguments.sorted(by: { $0.key < $1.key }) {
            guard name.hasPrefix("-"), name.count > 1, !name.contains(where: \.isWhitespace) else {
                throw .invalidOption("argument name \"\(name)\" must start with \"-\"")
            }
            guard !Self.reservedArguments.contains(name) else { throw .invalidOption("\(name) is set by the model") }
            arguments += [name, value]
        }
        self.arguments = arguments
        phones = Self.readPhones(mdefPath: (acousticModel as NSString).appendingPathComponent("mdef"))
    }

    /// A model in Earshot's installed asset layout: `acoustic/`, `language-model.lm.bin`,
    /// `dictionary.dict` inside `directory`.
    public init(assetDirectory directory: String, options: Options = Options()) throws(PocketSphinxError) {
        let base = directory as NSString
        try self.init(
            acousticModel: base.appendingPathComponent("acoustic"),
            languageModel: base.appendingPathComponent("language-model.lm.bin"),
            dictionary: base.appendingPathComponent("dictionary.dict"),
            options: options)
    }

    /// Checks again that every file is still there (assets can be removed after the model was
    /// described; decoders call this before loading).
    public func validate() throws(PocketSphinxError) {
        try Self.validateFiles(acousticModel: acousticModel, languageModel: languageModel, dictionary: dictionary)
    }

    static func validateFiles(acousticModel: String, languageModel: String, dictionary: String) throws(PocketSphinxError) {
        let files = FileManager.default
        var isDirectory: ObjCBool = false
        guard files.fileExists(atPath: acousticModel, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw .missingModelFile(.acousticModel, path: acousticModel)
        }
        let directory = acousticModel as NSString
        for name in ["mdef", "means", "variances", "transition_matrices"] {
            let path = directory.appendingPathComponent(name)
            guard isReadableFile(path) else { throw .missingModelFile(.acousticModel, path: path) }
        }
        let weights = ["sendump", "mixture_weights"].map { directory.appendingPathComponent($0) }
        guard weights.contains(where: isReadableFile) else { throw .missingModelFile(.acousticModel, path: weights[0]) }
        guard isReadableFile(languageModel) else { throw .missingModelFile(.languageModel, path: languageModel) }
        guard isReadableFile(dictionary) else { throw .missingModelFile(.dictionary, path: dictionary) }
    }

    private static func isReadableFile(_ path: String) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && !isDirectory.boolValue
            && FileManager.default.isReadableFile(atPath: path)
    }

    /// Context-independent phone names from a binary (`BMDF`) or text (`0.3`) model definition.
    static func readPhones(mdefPath: String) -> Set<String>? {
        guard let handle = FileHandle(forReadingAtPath: mdefPath) else { return nil }
        defer { try? handle.close() }
        guard let head = try? handle.read(upToCount: 1 << 16) else { return nil }
        let bytes = [UInt8](head)
        if bytes.starts(with: Array("BMDF".utf8)) || bytes.starts(with: Array("FDMB".utf8)) {
            return binaryPhones(bytes, swapped: bytes[0] == UInt8(ascii: "F"))
        }
        return textPhones(bytes)
    }

    private static func binaryPhones(_ bytes: [UInt8], swapped: Bool) -> Set<String>? {
        func int32(at offset: Int) -> Int? {
            guard offset >= 0, offset + 4 <= bytes.count else { return nil }
            var value = UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16 | UInt32(bytes[offset + 3]) << 24
            if swapped { value = value.byteSwapped }
            return Int(Int32(bitPattern: value))
        }
        // Layout: magic, version, length of the format description, the description, then ten
        // int32 counts (the first is the number of CI phones), then the phone names, NUL-ended.
        guard let descriptionLength = int32(at: 8), descriptionLength >= 0 else { return nil }
        let countsStart = 12 + descriptionLength
        guard let count = int32(at: countsStart), count > 0, count < 1000 else { return nil }
        var phones = Set<String>()
        var offset = countsStart + 40
        for _ in 0..<count {
            guard let end = bytes[min(offset, bytes.count)...].firstIndex(of: 0), end > offset else { return nil }
            phones.insert(String(decoding: bytes[offset..<end], as: UTF8.self))
            offset = end + 1
        }
        return phones
    }

    private static func textPhones(_ bytes: [UInt8]) -> Set<String>? {
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n").dropLast() // last may be cut
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }
        guard lines.first == "0.3" else { return nil }
        var baseCount: Int?
        var index = 1
        while index < lines.count {
            let fields = lines[index].split(whereSeparator: \.isWhitespace)
            guard fields.count == 2, fields[1].hasPrefix("n_"), let value = Int(fields[0]) else { break }
            if fields[1] == "n_base" { baseCount = value }
            index += 1
        }
        guard let baseCount, baseCount > 0, index + baseCount <= lines.count else { return nil }
        return Set(lines[index..<index + baseCount].compactMap { $0.split(whereSeparator: \.isWhitespace).first.map(String.init) })
    }
}
