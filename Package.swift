// swift-tools-version:6.0
import PackageDescription

/// One system-library target per C dependency; only one Earshot module imports each.
func systemLibrary(_ name: String, pkgConfig: String, apt: String) -> Target {
    .systemLibrary(name: name, pkgConfig: pkgConfig, providers: [.apt([apt])])
}

let package = Package(
    name: "Earshot",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "Earshot", targets: ["Earshot"]),
        .executable(name: "earshotd", targets: ["earshotd"]),
        .executable(name: "earshotctl", targets: ["earshotctl"]),
        .executable(name: "earshot", targets: ["earshot"]),
        .executable(name: "earshot-engine", targets: ["earshot-engine"]),
    ],
    targets: [
        systemLibrary("CCurl", pkgConfig: "libcurl", apt: "libcurl4-openssl-dev"),
        systemLibrary("CSQLite", pkgConfig: "sqlite3", apt: "libsqlite3-dev"),
        systemLibrary("CSystemd", pkgConfig: "libsystemd", apt: "libsystemd-dev"),
        systemLibrary("CArchive", pkgConfig: "libarchive", apt: "libarchive-dev"),
        systemLibrary("CCrypto", pkgConfig: "libcrypto", apt: "libssl-dev"),
        systemLibrary("CSndfile", pkgConfig: "sndfile", apt: "libsndfile1-dev"),
        systemLibrary("CSoxr", pkgConfig: "soxr", apt: "libsoxr-dev"),
        // FFmpeg for containers libsndfile does not read (client side only: the daemon never links it).
        // libpulse: microphone capture and the source list through PulseAudio or PipeWire (client
        // side only). Headers only: shim.h opens it with dlopen when a client first needs it.
        .systemLibrary(name: "CPulse", providers: [.apt(["libpulse-dev"])]),
        // Headers only, no pkg-config (it would link -lavformat): shim.h opens FFmpeg with dlopen
        // when a file first needs it, so clients do not load its ~270 libraries at every start.
        .systemLibrary(name: "CFFmpeg", providers: [.apt(["libavformat-dev", "libavcodec-dev", "libswresample-dev"])]),
        systemLibrary("CMicroHTTPD", pkgConfig: "libmicrohttpd", apt: "libmicrohttpd-dev"),
        // avahi-client: the Wyoming listener's zeroconf announcement. No pkg-config, as for CPulse
        // (its -D_REENTRANT is a flag SwiftPM refuses).
        .systemLibrary(name: "CAvahi", providers: [.apt(["libavahi-client-dev"])]),
        systemLibrary("CPocketSphinx", pkgConfig: "pocketsphinx", apt: "libpocketsphinx-dev"),
        // Pronunciations of contextual words missing from the PocketSphinx dictionary.
        systemLibrary("CEspeakNG", pkgConfig: "espeak-ng", apt: "libespeak-ng-dev"),
        // Installed from the PyPI wheel sherpa-onnx-core by Scripts/setup.sh (sherpa-onnx.pc).
        .systemLibrary(name: "CSherpaOnnx", pkgConfig: "sherpa-onnx"),
        // glibc's <malloc.h> (part of libc; nothing to link).
        .systemLibrary(name: "CMalloc"),
        .systemLibrary(name: "CTerminal"),
        // ONNX Runtime's C API: the header Scripts/setup.sh unpacks into .deps/ (Debian trixie's
        // libonnxruntime-dev), the library the sherpa-onnx-core wheel ships.
        .systemLibrary(name: "CONNXRuntime", pkgConfig: "onnxruntime-wheel"),
        systemLibrary("CFFTW", pkgConfig: "fftw3f", apt: "libfftw3-dev"),
        systemLibrary("CZlib", pkgConfig: "zlib", apt: "zlib1g-dev"),

        .target(name: "EarshotWire", exclude: ["README.md"]),
        .target(name: "EarshotSystem", dependencies: ["EarshotWire", "CMalloc"], exclude: ["README.md"]),
        .target(name: "EarshotTranscript", dependencies: ["EarshotWire"], exclude: ["README.md"]),
        // earshotd ↔ earshot-engine only: kept out of EarshotWire, which the client links.
        .target(name: "EarshotEngineLink", dependencies: ["EarshotWire"], exclude: ["README.md"]),
        // Optimised in debug builds too: compiling a model runs per phrase (up to 300 000) as a session opens.
        .target(name: "EarshotLanguageModel", exclude: ["README.md"], swiftSettings: [.unsafeFlags(["-O"])]),
        .target(name: "EarshotCommandLine", dependencies: ["EarshotWire", "EarshotSystem", "EarshotTranscript", "CTerminal"], exclude: ["README.md"]),
        .target(name: "EarshotClientCommandLine", dependencies: ["EarshotWire", "EarshotSystem", "EarshotCommandLine", "Earshot", "EarshotLanguageModel"], exclude: ["README.md"]),
        // earshotctl's commands (catalog authoring needs EarshotAssets, which `earshot` must not link).
        .target(name: "EarshotControlCommandLine", dependencies: ["EarshotWire", "EarshotCommandLine", "EarshotClientCommandLine", "Earshot", "EarshotAssets"],
                exclude: ["README.md"]),
        .target(name: "EarshotAssets", dependencies: [
            "EarshotWire", "EarshotSystem", "EarshotLanguageModel", "CCurl", "CSQLite", "CArchive", "CCrypto",
        ], exclude: ["README.md"]),
        .target(name: "EarshotAudio", dependencies: ["EarshotSystem", "CSndfile", "CSoxr"], exclude: ["README.md"]),
        .target(name: "EarshotSpeech", dependencies: [
            "EarshotWire", "EarshotEngineLink", "EarshotSystem", "EarshotAudio", "EarshotLanguageModel", "CPocketSphinx", "CEspeakNG",
        ], exclude: ["README.md"]),
        // The engine process's side: sherpa-onnx (and so ONNX Runtime) is linked only here.
        .target(name: "EarshotSherpaOnnx", dependencies: ["EarshotWire", "EarshotEngineLink", "EarshotSystem", "CSherpaOnnx"], exclude: ["README.md"]),
        // Earshot's own Whisper decoder on ONNX Runtime, in the engine process.
        // Optimised in debug builds too: its per-token loops (50 000 logits a step) would otherwise
        // make every test's decode several times slower than the product's.
        .target(name: "EarshotWhisper", dependencies: ["EarshotWire", "EarshotEngineLink", "EarshotSystem", "CONNXRuntime", "CFFTW", "CZlib"], exclude: ["README.md"],
                swiftSettings: [.unsafeFlags(["-O"])]),
        // The engine process's server: the link to earshotd, over our decoder and sherpa-onnx's detector.
        .target(name: "EarshotEngine", dependencies: ["EarshotWire", "EarshotEngineLink", "EarshotSystem", "EarshotSherpaOnnx", "EarshotWhisper"], exclude: ["README.md"]),
        .target(name: "EarshotHTTP", dependencies: ["EarshotSystem", "CMicroHTTPD"], exclude: ["README.md"]),
        .target(name: "EarshotDaemon", dependencies: [
            "EarshotWire", "EarshotSystem", "EarshotAssets", "EarshotLanguageModel", "EarshotSpeech", "EarshotAudio", "EarshotHTTP", "EarshotTranscript",
            "EarshotCommandLine", "CSystemd", "CAvahi",
        ], exclude: ["README.md"]),
        .target(name: "EarshotAVFoundation", dependencies: ["EarshotWire", "EarshotSystem", "EarshotAudio", "CFFmpeg", "CPulse"], exclude: ["README.md"]),
        .target(name: "Earshot", dependencies: ["EarshotWire", "EarshotSystem", "EarshotAudio", "EarshotAVFoundation", "EarshotLanguageModel"], exclude: ["README.md"]),
        .target(name: "TestSupport", dependencies: ["EarshotWire", "EarshotSystem"], exclude: ["README.md"]),

        .executableTarget(name: "earshotd", dependencies: ["EarshotDaemon"]),
        .executableTarget(name: "earshotctl", dependencies: ["EarshotControlCommandLine"]),
        .executableTarget(name: "earshot", dependencies: ["EarshotClientCommandLine"]),
        .executableTarget(name: "earshot-engine", dependencies: ["EarshotEngine", "EarshotSystem"]),

        .executableTarget(name: "earshot-bench", dependencies: ["EarshotAssets"], path: "Benchmarks/earshot-bench"),
        .executableTarget(name: "fuzz-bench", dependencies: ["EarshotSystem", "EarshotWire", "TestSupport"], path: "Benchmarks/fuzz-bench"),
        .executableTarget(name: "vs-peers", dependencies: ["EarshotSystem", "EarshotWire", "TestSupport"], path: "Benchmarks/vs-peers"),
        .executableTarget(name: "quantization", dependencies: ["EarshotWhisper", "EarshotEngineLink", "EarshotWire", "TestSupport"], path: "Benchmarks/quantization"),
        .executableTarget(name: "wyoming-latency", dependencies: ["EarshotSystem", "TestSupport"], path: "Benchmarks/wyoming-latency"),
        .executableTarget(name: "speech-bench", dependencies: ["EarshotSpeech", "EarshotAudio", "EarshotWire", "EarshotSystem", "TestSupport"], path: "Benchmarks/speech-bench"),

        .testTarget(name: "EarshotWireTests", dependencies: ["EarshotWire", "EarshotEngineLink", "EarshotSystem", "TestSupport"]),
        .testTarget(name: "EarshotCommandLineTests", dependencies: ["EarshotCommandLine"]),
        .testTarget(name: "EarshotLanguageModelTests", dependencies: ["EarshotLanguageModel"]),
        .testTarget(name: "EarshotSystemTests", dependencies: ["EarshotSystem", "TestSupport"]),
        .testTarget(name: "EarshotSpeechTests", dependencies: ["EarshotSpeech", "EarshotEngineLink", "EarshotAudio", "EarshotLanguageModel", "TestSupport"]),
        .testTarget(name: "EarshotWhisperTests", dependencies: ["EarshotWhisper", "EarshotEngineLink", "EarshotSystem", "EarshotWire", "TestSupport"]),
        .testTarget(name: "EarshotHTTPTests", dependencies: ["EarshotHTTP", "EarshotSystem", "TestSupport"]),
        .testTarget(name: "EarshotAudioTests", dependencies: ["EarshotAudio", "TestSupport"]),
        .testTarget(name: "EarshotAssetsTests", dependencies: ["EarshotAssets", "EarshotLanguageModel", "TestSupport"]),
        .testTarget(name: "EarshotDaemonTests", dependencies: ["EarshotDaemon", "EarshotAssets", "EarshotAudio", "EarshotSpeech", "EarshotHTTP", "EarshotTranscript", "TestSupport"]),
        .testTarget(name: "ApplePortingTests", dependencies: ["Earshot", "EarshotWire", "TestSupport"]),
        .testTarget(name: "IntegrationTests", dependencies: ["Earshot", "EarshotWire", "EarshotSystem", "EarshotAudio", "EarshotCommandLine", "EarshotClientCommandLine", "TestSupport"]),
    ]
)
