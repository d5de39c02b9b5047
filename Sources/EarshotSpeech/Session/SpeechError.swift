/// Why the speech service refused or ended a session; the daemon's error map gives each its wire code.
public enum SpeechError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Too many analyses at once (`open` running, `limit` allowed) and the queue for a free slot
    /// full (`queued` waiting; 0 when there is no queue).
    case admissionLimit(open: Int, limit: Int, queued: Int = 0)
    /// An installed asset lacks files its engine needs (reinstall it).
    case incompleteAsset(String)
    /// The asset's engine is not one this daemon has.
    case unknownEngine(asset: String, engine: String)
    /// The engine does not transcribe this locale.
    case unsupportedLocale(String)
    /// No such session.
    case noSession(String)
    /// Audio not in the analyzer's format (16 kHz mono s16le, whole samples).
    case unsupportedAudio(String)
    /// Session options that cannot be honoured together (a keep-alive without `lingering`).
    case invalidOptions(String)
    /// Loading a model of about `needed` bytes would take loaded models past the `budget`
    /// (`[Analysis] MaxModelMemoryMiB`), and the `inUse` bytes of models sessions use cannot go.
    case modelMemory(needed: Int, budget: Int, inUse: Int)

    public var description: String {
        switch self {
        case .admissionLimit(let open, let limit, 0): "too many analyses at once (\(open) running, limit \(limit)); retry when one finishes"
        case .admissionLimit(let open, let limit, let queued):
            "too many analyses at once (\(open) running, limit \(limit)) and \(queued) already waiting for a slot ([Analysis] MaxQueued); retry when one finishes"
        case .incompleteAsset(let what): what
        case .unknownEngine(let asset, let engine): "\(asset) needs engine '\(engine)', which this daemon does not have"
        case .unsupportedLocale(let what): what
        case .noSession(let id): "no analysis session '\(id)'"
        case .unsupportedAudio(let what): what
        case .invalidOptions(let what): what
        case .modelMemory(let needed, let budget, let inUse):
            "loading another model (about \(needed >> 20) MiB) would pass the models' memory budget of \(budget >> 20) MiB ([Analysis] MaxModelMemoryMiB): \(inUse >> 20) MiB are in use by running sessions; retry when one finishes"
        }
    }
}
