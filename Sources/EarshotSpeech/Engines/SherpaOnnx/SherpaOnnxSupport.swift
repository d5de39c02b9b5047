import Foundation

/// Helpers shared by the sherpa-onnx engines.
enum SherpaOnnxSupport {
    /// Copies `strings` to C strings that stay valid for the whole of `body` (sherpa-onnx reads a
    /// config's strings during the create call), then frees them.
    static func withCStrings<R>(_ strings: [String], _ body: ([UnsafePointer<CChar>]) -> R) -> R {
        let owned = strings.map { strdup($0)! }
        defer { owned.forEach { free($0) } }
        return body(owned.map { UnsafePointer($0) })
    }
}
