import EarshotAssets
import EarshotWire
import Foundation
import Testing

/// A valid catalog document in the documented spelling.
let sampleCatalogJSON = #"""
{
  "format": 1,
  "version": 12,
  "generated": "2025-06-01T12:00:00Z",
  "assets": [
    {
      "id": "whisper-tiny.en",
      "version": 3,
      "kind": "transcriber",
      "engine": "sherpa-onnx-whisper",
      "locales": ["en-US", "en-GB"],
      "capabilities": {
        "streaming": false,
        "volatile_results": true,
        "time_ranges": true,
        "alternatives": false,
        "confidence": true,
        "content_hints": ["farField"]
      },
      "size": 117000000,
      "installed_size": 160000000,
      "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
      "urls": ["https://models.example.org/whisper-tiny.en-3.tar.bz2", "file:///srv/mirror/whisper-tiny.en-3.tar.bz2"],
      "format": "tar.bz2",
      "files": {"encoder": "tiny.en-encoder.onnx", "decoder": "tiny.en-decoder.onnx", "tokens": "tiny.en-tokens.txt"},
      "license": "MIT",
      "description": "Whisper tiny, English"
    },
    {
      "id": "silero-vad",
      "version": 1,
      "kind": "detector",
      "engine": "sherpa-onnx-silero-vad",
      "locales": [],
      "capabilities": {"streaming": true, "volatile_results": false, "time_ranges": true, "alternatives": false, "confidence": false, "content_hints": []},
      "size": 2327524,
      "installed_size": 2327524,
      "sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
      "urls": ["http://127.0.0.1:8080/silero_vad.onnx"],
      "format": "file",
      "files": {"model": "silero_vad.onnx"},
      "license": "MIT"
    }
  ]
}
"""#

/// A valid asset to mutate in validation tests.
func sampleAsset(id: String = "pocketsphinx-en-us", version: Int = 1, kind: AssetKind = .dictation) -> CatalogAsset {
    CatalogAsset(
        id: id, version: version, kind: kind, engine: "pocketsphinx", locales: kind == .detector ? [] : ["en-US"],
        capabilities: AssetCapabilities(alternatives: true, confidence: true, contentHints: ["customizedLanguage"]),
        size: 30_000_000, installedSize: 40_000_000,
        sha256: String(repeating: "ab", count: 32),
        urls: ["file:///var/lib/earshot/sources/pocketsphinx-en-us.tar.gz"],
        format: .tarGz,
        files: ["model": "en-us/en-us", "dictionary": "en-us/cmudict-en-us.dict", "language_model": "en-us/en-us.lm.bin"],
        license: "BSD-2-Clause"
    )
}

/// One validation rule: how to break a valid asset and the problem that must be reported.
struct AssetRuleCase: Sendable, CustomTestStringConvertible {
    let name: String
    let expected: CatalogAssetProblem
    let breakIt: @Sendable (inout CatalogAsset) -> Void
    var testDescription: String { name }
}

let assetRuleCases: [AssetRuleCase] = [
    AssetRuleCase(name: "empty id", expected: .invalidID) { $0.id = "" },
    AssetRuleCase(name: "upper-case id", expected: .invalidID) { $0.id = "Whisper" },
    AssetRuleCase(name: "id with slash", expected: .invalidID) { $0.id = "a/b" },
    AssetRuleCase(name: "id '..'", expected: .invalidID) { $0.id = ".." },
    AssetRuleCase(name: "id starting with '-'", expected: .invalidID) { $0.id = "-x" },
    AssetRuleCase(name: "id too long", expected: .invalidID) { $0.id = String(repeating: "a", count: 129) },
    AssetRuleCase(name: "version 0", expected: .invalidVersion) { $0.version = 0 },
    AssetRuleCase(name: "empty engine", expected: .emptyEngine) { $0.engine = " " },
    AssetRuleCase(name: "dictation without locales", expected: .noLocales) { $0.locales = [] },
    AssetRuleCase(name: "bad locale", expected: .invalidLocale("english")) { $0.locales = ["en-US", "english"] },
    AssetRuleCase(name: "size 0", expected: .invalidSize) { $0.size = 0 },
    AssetRuleCase(name: "negative size", expected: .invalidSize) { $0.size = -5 },
    AssetRuleCase(name: "installed_size 0", expected: .invalidInstalledSize) { $0.installedSize = 0 },
    AssetRuleCase(name: "single file larger than installed_size", expected: .installedSizeBelowSize) {
        $0.format = .file
        $0.files = ["model": "model.onnx"]
        $0.installedSize = $0.size - 1
    },
    AssetRuleCase(name: "upper-case digest", expected: .invalidSHA256(String(repeating: "AB", count: 32))) { $0.sha256 = String(repeating: "AB", count: 32) },
    AssetRuleCase(name: "short digest", expected: .invalidSHA256("abc")) { $0.sha256 = "abc" },
    AssetRuleCase(name: "non-hex digest", expected: .invalidSHA256(String(repeating: "g", count: 64))) { $0.sha256 = String(repeating: "g", count: 64) },
    AssetRuleCase(name: "no URLs", expected: .noURLs) { $0.urls = [] },
    AssetRuleCase(name: "ftp URL", expected: .invalidURL("ftp://example.org/a.tar.gz", reason: "scheme \"ftp\" is not http, https or file")) {
        $0.urls.append("ftp://example.org/a.tar.gz")
    },
    AssetRuleCase(name: "relative URL", expected: .invalidURL("models/a.tar.gz", reason: "not an absolute URL")) { $0.urls = ["models/a.tar.gz"] },
    AssetRuleCase(name: "https without host", expected: .invalidURL("https:///a.tar.gz", reason: "no host")) { $0.urls = ["https:///a.tar.gz"] },
    AssetRuleCase(name: "file URL with host", expected: .invalidURL("file://server/a.tar.gz", reason: "a file URL must not name a host")) {
        $0.urls = ["file://server/a.tar.gz"]
    },
    AssetRuleCase(name: "no files", expected: .noFiles) { $0.files = [:] },
    AssetRuleCase(name: "bad role", expected: .invalidFileRole("Model")) { $0.files["Model"] = "x.onnx" },
    AssetRuleCase(name: "absolute path", expected: .invalidFilePath(role: "model", path: "/etc/passwd")) { $0.files["model"] = "/etc/passwd" },
    AssetRuleCase(name: "dot-dot path", expected: .invalidFilePath(role: "model", path: "en-us/../../x")) { $0.files["model"] = "en-us/../../x" },
    AssetRuleCase(name: "path '..'", expected: .invalidFilePath(role: "model", path: "..")) { $0.files["model"] = ".." },
    AssetRuleCase(name: "empty path", expected: .invalidFilePath(role: "model", path: "")) { $0.files["model"] = "" },
    AssetRuleCase(name: "path with empty component", expected: .invalidFilePath(role: "model", path: "a//b")) { $0.files["model"] = "a//b" },
    AssetRuleCase(name: "file format with three roles", expected: .singleFileNeedsOneRole(count: 3)) { $0.format = .file },
    AssetRuleCase(name: "empty license", expected: .emptyLicense) { $0.license = "" },
]

@Suite("Catalog model and validation")
struct CatalogTests {
    @Test func decodesDocumentedSpelling() throws {
        let catalog = try Catalog.decode(from: Data(sampleCatalogJSON.utf8))
        #expect(catalog.format == 1)
        #expect(catalog.version == 12)
        #expect(catalog.generated == "2025-06-01T12:00:00Z")
        #expect(catalog.assets.count == 2)
        let whisper = catalog.assets[0]
        #expect(whisper.id == "whisper-tiny.en")
        #expect(whisper.kind == .transcriber)
        #expect(whisper.capabilities == AssetCapabilities(volatileResults: true, timeRanges: true, confidence: true, contentHints: ["farField"]))
        #expect(whisper.installedSize == 160_000_000)
        #expect(whisper.format == .tarBz2)
        #expect(whisper.files["decoder"] == "tiny.en-decoder.onnx")
        #expect(whisper.description == "Whisper tiny, English")
        let vad = catalog.assets[1]
        #expect(vad.kind == .detector)
        #expect(vad.locales.isEmpty)
        #expect(vad.format == .file)
        #expect(vad.description == nil)
    }

    @Test func documentedExampleIsValid() throws {
        let testFile = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
        let doc = testFile.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Docs/CATALOG.md")
        let text = try String(contentsOf: doc, encoding: .utf8)
        let start = try #require(text.range(of: "```json\n"))
        let end = try #require(text.range(of: "\n```", range: start.upperBound..<text.endIndex))
        let catalog = try Catalog.decode(from: Data(text[start.upperBound..<end.lowerBound].utf8))
        #expect(catalog.assets.map(\.id) == ["whisper-tiny.en", "silero-vad"])
    }

    @Test func encodesSnakeCaseAndRoundTrips() throws {
        let catalog = try Catalog.decode(from: Data(sampleCatalogJSON.utf8))
        let data = try Catalog.makeEncoder().encode(catalog)
        let text = String(decoding: data, as: UTF8.self)
        for key in ["\"installed_size\"", "\"volatile_results\"", "\"time_ranges\"", "\"content_hints\"", "\"tar.bz2\"", "https://models.example.org/"] {
            #expect(text.contains(key))
        }
        #expect(!text.contains("installedSize"))
        #expect(try Catalog.decode(from: data) == catalog)
    }

    @Test func sampleAssetIsValid() throws {
        for kind in AssetKind.allCases {
            #expect(sampleAsset(kind: kind).problems() == [])
        }
        try Catalog(version: 1, assets: [sampleAsset(), sampleAsset(version: 2), sampleAsset(id: "other")]).validate()
        try Catalog(version: 1, assets: []).validate()
    }

    @Test(arguments: assetRuleCases)
    func reportsBrokenRule(_ rule: AssetRuleCase) {
        var asset = sampleAsset()
        rule.breakIt(&asset)
        #expect(asset.problems() == [rule.expected])
        let catalog = Catalog(version: 3, assets: [sampleAsset(id: "fine"), asset])
        #expect(throws: CatalogError.invalidAsset(index: 1, id: asset.id, version: asset.version, problem: rule.expected)) {
            try catalog.validate()
        }
    }

    @Test func acceptsWhatTheRulesAllow() {
        var asset = sampleAsset(kind: .detector)
        asset.urls = ["HTTPS://Mirror.example.org/x", "http://[::1]:8080/x", "file:///x", "file://localhost/x"]
        asset.files = ["model": "x/y.onnx", "tokens": "dir.with.dots/..tokens"]
        asset.locales = []
        #expect(asset.problems() == [])
        asset.locales = ["en_US", "zh-Hant-TW", "de"]
        #expect(asset.problems() == [])
    }

    @Test func rejectsDuplicateIDAndVersion() {
        let catalog = Catalog(version: 2, assets: [sampleAsset(), sampleAsset(id: "b"), sampleAsset()])
        #expect(throws: CatalogError.duplicateAsset(id: "pocketsphinx-en-us", version: 1)) { try catalog.validate() }
    }

    @Test func rejectsUnsupportedFormatAndVersion() {
        #expect(throws: CatalogError.unsupportedFormat(2)) { try Catalog(format: 2, version: 1, assets: []).validate() }
        #expect(throws: CatalogError.invalidVersion(0)) { try Catalog(version: 0, assets: []).validate() }
    }

    @Test func listsEveryProblem() {
        var broken = sampleAsset()
        broken.sha256 = "x"
        broken.license = ""
        let problems = Catalog(format: 9, version: 1, assets: [broken, broken]).problems()
        #expect(problems == [
            .unsupportedFormat(9),
            .invalidAsset(index: 0, id: broken.id, version: 1, problem: .invalidSHA256("x")),
            .invalidAsset(index: 0, id: broken.id, version: 1, problem: .emptyLicense),
            .invalidAsset(index: 1, id: broken.id, version: 1, problem: .invalidSHA256("x")),
            .invalidAsset(index: 1, id: broken.id, version: 1, problem: .emptyLicense),
            .duplicateAsset(id: broken.id, version: 1),
        ])
    }

    @Test func malformedJSONNamesThePath() {
        let cases: [(String, String)] = [
            (sampleCatalogJSON.replacingOccurrences(of: "\"detector\"", with: "\"singer\""), "assets[1].kind"),
            (sampleCatalogJSON.replacingOccurrences(of: "\"tar.bz2\"", with: "\"rar\""), "assets[0].format"),
            (sampleCatalogJSON.replacingOccurrences(of: "\"installed_size\": 160000000,", with: ""), "assets[0].installed_size"),
            (sampleCatalogJSON.replacingOccurrences(of: "\"version\": 12", with: "\"version\": \"12\""), "version"),
            ("[1, 2]", "top level"),
            ("{\"format\": 1, ", ""),
        ]
        for (json, path) in cases {
            let error = #expect(throws: CatalogError.self) { try Catalog.decode(from: Data(json.utf8)) }
            guard case .malformedJSON(let detail) = error else {
                Issue.record("expected malformedJSON for \(path), got \(String(describing: error))")
                continue
            }
            #expect(detail.hasPrefix(path), "\(detail)")
        }
    }

    @Test func errorsSayWhichAssetAndWhat() {
        let error = CatalogError.invalidAsset(index: 4, id: "whisper-base", version: 2, problem: .invalidSHA256("xyz"))
        #expect(error.description == "catalog assets[4] (\"whisper-base\" version 2): sha256 \"xyz\" is not 64 lowercase hex digits")
        #expect(CatalogError.rollback(current: 9, offered: 8).description.contains("older than the current version 9"))
    }

    @Test func mergeKeepsHighestVersionPerID() {
        let first = Catalog(version: 5, assets: [sampleAsset(id: "a", version: 1), sampleAsset(id: "b", version: 4), sampleAsset(id: "a", version: 3)])
        let second = Catalog(version: 9, assets: [sampleAsset(id: "c", version: 1), sampleAsset(id: "a", version: 2), sampleAsset(id: "b", version: 5)])
        let merged = Catalog.merged([first, second])
        #expect(merged.map(\.id) == ["a", "b", "c"])
        #expect(merged.map(\.version) == [3, 5, 1])
        #expect(Catalog.merged([]) == [])
    }

    @Test func mergeTieKeepsFirstSource() {
        var mine = sampleAsset(id: "a", version: 2)
        mine.urls = ["https://first.example.org/a"]
        var theirs = sampleAsset(id: "a", version: 2)
        theirs.urls = ["https://second.example.org/a"]
        #expect(Catalog.merged([Catalog(version: 1, assets: [mine]), Catalog(version: 1, assets: [theirs])]) == [mine])
        #expect(Catalog.merged([Catalog(version: 1, assets: [theirs]), Catalog(version: 1, assets: [mine])]) == [theirs])
    }
}
