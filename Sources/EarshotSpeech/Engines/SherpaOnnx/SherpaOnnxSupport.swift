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

    /// Resident set size of this process in bytes, from `/proc/self/statm` (0 where unavailable).
    static func residentMemoryBytes() -> Int {
        // /proc files report size 0, so read to the end rather than by size.
        guard let handle = FileHandle(forReadingAtPath: "/proc/self/statm") else { return 0 }
        defer { try? handle.close() }
        guard let data = try? handle.readToEnd(), let text = String(data: data, encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
