import CONNXRuntime
import Foundation

/// A failure ONNX Runtime reported, with its message.
struct ONNXRuntimeError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// ONNX Runtime's C API table and the process's one environment. The API is versioned and
/// append-only: we ask the library for the version our header declares.
final class ONNXRuntime: @unchecked Sendable {
    // @unchecked: `api` and `env` are set once and ONNX Runtime's calls on them are thread-safe.
    static let shared = ONNXRuntime()

    let api: OrtApi
    let env: OpaquePointer
    let allocator: UnsafeMutablePointer<OrtAllocator>
    let cpuMemory: OpaquePointer

    private init() {
        guard let base = OrtGetApiBase(), let table = base.pointee.GetApi(UInt32(ORT_API_VERSION)) else {
            fatalError("libonnxruntime does not provide C API version \(ORT_API_VERSION)")
        }
        api = table.pointee
        var env: OpaquePointer?
        var allocator: UnsafeMutablePointer<OrtAllocator>?
        var memory: OpaquePointer?
        do {
            try Self.check(table.pointee, table.pointee.CreateEnv(ORT_LOGGING_LEVEL_ERROR, "earshot-engine", &env))
            try Self.check(table.pointee, table.pointee.GetAllocatorWithDefaultOptions(&allocator))
            try Self.check(table.pointee, table.pointee.CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &memory))
        } catch {
            fatalError("ONNX Runtime could not start: \(error)")
        }
        self.env = env!
        self.allocator = allocator!
        cpuMemory = memory!
    }

    /// The library's version string (`earshot-engine --version`).
    static var version: String {
        guard let base = OrtGetApiBase(), let version = base.pointee.GetVersionString() else { return "unknown" }
        return String(cString: version)
    }

    func check(_ status: OpaquePointer?) throws {
        try Self.check(api, status)
    }

    private static func check(_ api: OrtApi, _ status: OpaquePointer?) throws {
        guard let status else { return }
        let message = api.GetErrorMessage(status).map { String(cString: $0) } ?? "unknown error"
        api.ReleaseStatus(status)
        throw ONNXRuntimeError(message: message)
    }
}

/// An ONNX Runtime value this process owns (a tensor), released with it.
final class ORTValue: @unchecked Sendable {
    // @unchecked: a value is used by one decode at a time.
    let pointer: OpaquePointer
    /// The value whose storage a view reads (kept alive with it).
    private let storageOwner: ORTValue?

    init(owning pointer: OpaquePointer, storageOwner: ORTValue? = nil) {
        self.pointer = pointer
        self.storageOwner = storageOwner
    }

    /// A float tensor of `shape` over `parent`'s storage from element `offset` on: no copy.
    static func view(of parent: ORTValue, offset: Int, shape: [Int]) throws -> ORTValue {
        let runtime = ONNXRuntime.shared
        let count = shape.reduce(1, *)
        let storage = parent.floats()
        precondition(offset >= 0 && offset + count <= storage.count, "a view past its tensor's end")
        let dims = shape.map(Int64.init)
        var made: OpaquePointer?
        try runtime.check(runtime.api.CreateTensorWithDataAsOrtValue(
            runtime.cpuMemory, UnsafeMutableRawPointer(mutating: storage.baseAddress! + offset), count * MemoryLayout<Float>.size,
            dims, dims.count, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &made))
        return ORTValue(owning: made!, storageOwner: parent)
    }

    deinit {
        ONNXRuntime.shared.api.ReleaseValue(pointer)
    }

    /// A new float tensor of `shape`, filled by `fill` (which gets the tensor's storage).
    static func floats(_ shape: [Int], _ fill: (UnsafeMutableBufferPointer<Float>) -> Void) throws -> ORTValue {
        let value = try make(shape, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
        fill(value.mutableFloats(count: shape.reduce(1, *)))
        return value
    }

    /// A new int64 tensor of `shape` holding `values`.
    static func int64s(_ shape: [Int], _ values: [Int64]) throws -> ORTValue {
        let value = try make(shape, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64)
        let runtime = ONNXRuntime.shared
        var data: UnsafeMutableRawPointer?
        try runtime.check(runtime.api.GetTensorMutableData(value.pointer, &data))
        values.withUnsafeBytes { data!.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        return value
    }

    private static func make(_ shape: [Int], _ type: ONNXTensorElementDataType) throws -> ORTValue {
        let runtime = ONNXRuntime.shared
        var made: OpaquePointer?
        let dims = shape.map(Int64.init)
        try runtime.check(runtime.api.CreateTensorAsOrtValue(runtime.allocator, dims, dims.count, type, &made))
        return ORTValue(owning: made!)
    }

    /// The tensor's dimensions.
    var shape: [Int] {
        let runtime = ONNXRuntime.shared
        var info: OpaquePointer?
        guard (try? runtime.check(runtime.api.GetTensorTypeAndShape(pointer, &info))) != nil, let info else { return [] }
        defer { runtime.api.ReleaseTensorTypeAndShapeInfo(info) }
        var count = 0
        _ = runtime.api.GetDimensionsCount(info, &count)
        var dims = [Int64](repeating: 0, count: count)
        _ = runtime.api.GetDimensions(info, &dims, count)
        return dims.map(Int.init)
    }

    /// The tensor's float storage (valid while the value lives).
    func floats() -> UnsafeBufferPointer<Float> {
        UnsafeBufferPointer(mutableFloats())
    }

    /// The tensor's float storage, to write (valid while the value lives).
    func mutableFloats() -> UnsafeMutableBufferPointer<Float> {
        mutableFloats(count: shape.reduce(1, *))
    }

    private func mutableFloats(count: Int) -> UnsafeMutableBufferPointer<Float> {
        let runtime = ONNXRuntime.shared
        var data: UnsafeMutableRawPointer?
        _ = try? runtime.check(runtime.api.GetTensorMutableData(pointer, &data))
        return UnsafeMutableBufferPointer(start: data?.assumingMemoryBound(to: Float.self), count: data == nil ? 0 : count)
    }
}

/// An inference session over one ONNX file. `run` may be called from several threads at once.
final class ORTSession: @unchecked Sendable {
    // @unchecked: ONNX Runtime sessions are safe for concurrent Run calls; the rest is immutable.
    private let session: OpaquePointer
    private let metadata: [String: String]

    /// Loads `path` with `threads` intra-operator threads. Blocking. With `memoryPattern`, each
    /// run takes its intermediate tensors from one block laid out by a trace of the first run of
    /// the same input shapes; the arena keeps that first run's own chunks too.
    init(path: String, threads: Int, memoryPattern: Bool = true, metadataKeys: [String] = []) throws {
        let runtime = ONNXRuntime.shared
        let api = runtime.api
        var options: OpaquePointer?
        try runtime.check(api.CreateSessionOptions(&options))
        defer { api.ReleaseSessionOptions(options) }
        try runtime.check(api.SetIntraOpNumThreads(options, Int32(max(1, threads))))
        try runtime.check(api.SetInterOpNumThreads(options, 1))
        // The intra-op threads sleep between parallel sections instead of spinning: spinning took a
        // third of the CPU a decode used, and decodes ran 12–16 % faster without it
        // (Benchmarks/README.md, "ONNX Runtime's spinning"); a shared daemon should not burn cores.
        try runtime.check(api.AddSessionConfigEntry(options, "session.intra_op.allow_spinning", "0"))
        try runtime.check(api.SetSessionGraphOptimizationLevel(options, ORT_ENABLE_ALL))
        if !memoryPattern { try runtime.check(api.DisableMemPattern(options)) }
        var made: OpaquePointer?
        try runtime.check(api.CreateSession(runtime.env, path, options, &made))
        session = made!
        var found: [String: String] = [:]
        var model: OpaquePointer?
        if !metadataKeys.isEmpty {
            try runtime.check(api.SessionGetModelMetadata(session, &model))
            defer { api.ReleaseModelMetadata(model) }
            for key in metadataKeys {
                var value: UnsafeMutablePointer<CChar>?
                try runtime.check(api.ModelMetadataLookupCustomMetadataMap(model, runtime.allocator, key, &value))
                if let value {
                    found[key] = String(cString: value)
                    _ = api.AllocatorFree(runtime.allocator, value)
                }
            }
        }
        metadata = found
    }

    deinit {
        ONNXRuntime.shared.api.ReleaseSession(session)
    }

    /// The model's custom metadata value for `key` (one of those asked for at load).
    func metadata(_ key: String) -> String? { metadata[key] }

    /// Runs the graph on `inputs` (name, value) and returns the outputs named, in order. Blocking.
    func run(_ inputs: [(String, ORTValue)], outputs: [String]) throws -> [ORTValue] {
        let runtime = ONNXRuntime.shared
        let inputNames = inputs.map { strdup($0.0)! }
        let outputNames = outputs.map { strdup($0)! }
        defer {
            inputNames.forEach { free($0) }
            outputNames.forEach { free($0) }
        }
        let inputValues: [OpaquePointer?] = inputs.map { $0.1.pointer }
        var results = [OpaquePointer?](repeating: nil, count: outputs.count)
        let status = inputNames.map { UnsafePointer($0) as UnsafePointer<CChar>? }.withUnsafeBufferPointer { names in
            outputNames.map { UnsafePointer($0) as UnsafePointer<CChar>? }.withUnsafeBufferPointer { outNames in
                runtime.api.Run(session, nil, names.baseAddress, inputValues, inputs.count, outNames.baseAddress, outputs.count, &results)
            }
        }
        try runtime.check(status)
        return results.map { ORTValue(owning: $0!) }
    }
}
