import CSherpaOnnx

/// sherpa-onnx's run-time version (`earshot-engine --version`).
public enum SherpaOnnxLibrary {
    public static var version: String { String(cString: SherpaOnnxGetVersionStr()) }
}
