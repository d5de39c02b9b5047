/// Bounds on custom language model data: the daemon reads exported files from any local app, so
/// each count is bounded before anything is expanded or compiled.
public struct CustomLanguageModelLimits: Sendable, Hashable {
    /// The daemon's default frame payload limit (`Limits.MaxPayloadBytes`): a file travels in one frame.
    public var maxFileBytes = 4 << 20
    public var maxIdentifierLength = 256
    public var maxPhrases = 100_000
    public var maxPhraseLength = 256
    public var maxCount = 1_000_000_000
    public var maxTemplateGroups = 256
    public var maxTemplates = 1_000
    public var maxClasses = 256
    public var maxClassNameLength = 64
    public var maxClassMembers = 10_000
    /// Phrases all templates of a file expand to, together.
    public var maxExpandedPhrases = 200_000
    public var maxExpandedPhraseLength = 512
    public var maxPronunciations = 10_000
    public var maxGraphemeLength = 64
    public var maxPronunciationVariants = 8
    public var maxPronunciationLength = 256

    /// The bounds the daemon and the client library use.
    public static let standard = CustomLanguageModelLimits()

    public init() {}
}
