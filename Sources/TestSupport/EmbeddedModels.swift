import Foundation

/// The models `Scripts/setup.sh` installs (the embedded default catalog's sources), and the rule
/// for tests that need them: a missing model skips the test on a developer's machine but fails it
/// under `CI=true`, where setup must have provided it.
public enum EmbeddedModels {
    /// Where setup puts the embedded catalog, its archives and the converted model directories.
    public static let prefix = "/usr/local/share/earshot"
    public static let catalog = prefix + "/catalog/catalog.json"
    /// Whisper base (multilingual), converted from the PyPI wheels.
    public static let whisperBase = prefix + "/models/whisper-base"
    /// Whisper tiny.en, converted from the PyPI wheel.
    public static let whisperTinyEn = prefix + "/models/whisper-tiny.en"

    /// Whether this run is CI's, where every prerequisite must be present.
    public static let isCI = ProcessInfo.processInfo.environment["CI"] == "true"

    /// Whether a test needing something that is `present` runs: always under CI (so that a missing
    /// model is a failure), else only when it is there.
    public static func runs(_ present: Bool) -> Bool { present || isCI }

    /// Whether a converted Whisper directory holds its three files (`PREFIX-encoder.int8.onnx`, …).
    public static func whisperPresent(_ directory: String, prefix name: String) -> Bool {
        ["\(name)-encoder.int8.onnx", "\(name)-decoder.int8.onnx", "\(name)-tokens.txt"].allSatisfy {
            FileManager.default.isReadableFile(atPath: directory + "/" + $0)
        }
    }

    /// Whether the embedded catalog lists asset `id`.
    public static func catalogLists(_ id: String) -> Bool {
        ((try? String(contentsOfFile: catalog, encoding: .utf8)) ?? "").contains("\"\(id)\"")
    }
}
