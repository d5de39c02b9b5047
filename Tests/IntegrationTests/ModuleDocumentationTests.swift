import Foundation
import Testing

/// Issue 31: each module says in a few lines what it owns, may import and must not do; the
/// top-level README names every module; documents name only documents that exist.
@Suite struct ModuleDocumentationTests {
    static let root = #filePath.components(separatedBy: "/Tests/")[0]

    /// Library modules: every folder of Sources/ but the C system libraries and the executables.
    static func modules() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: root + "/Sources").filter { name in
            guard let first = name.first, first.isUppercase, !(name.count > 1 && first == "C" && name.dropFirst().first!.isUppercase) else { return false }
            return true
        }.sorted()
    }

    @Test func everyModuleReadmeIsShortAndSaysWhatTheModuleMayImportAndMustNotDo() throws {
        let modules = try Self.modules()
        #expect(modules.contains("EarshotDaemon") && modules.contains("TestSupport") && !modules.contains("CCurl"))
        for module in modules {
            let text = try String(contentsOfFile: "\(Self.root)/Sources/\(module)/README.md", encoding: .utf8)
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
            #expect(lines.count <= 15, "\(module)/README.md has \(lines.count) lines")
            #expect(lines.first == "# \(module)", "\(module)/README.md starts with its name")
            #expect(lines.contains { $0.hasPrefix("May import:") } && lines.contains { $0.hasPrefix("Must not:") }, "\(module)/README.md")
        }
    }

    @Test func theReadmeNamesEveryModule() throws {
        let readme = try String(contentsOfFile: Self.root + "/README.md", encoding: .utf8)
        for module in try Self.modules() { #expect(readme.contains("`\(module)`"), "README.md does not name \(module)") }
    }

    @Test func documentsNameOnlyDocumentsThatExist() throws {
        var texts = [Self.root + "/README.md"]
        texts += try FileManager.default.contentsOfDirectory(atPath: Self.root + "/Docs").filter { $0.hasSuffix(".md") }.map { Self.root + "/Docs/" + $0 }
        texts += try Self.modules().map { "\(Self.root)/Sources/\($0)/README.md" }
        let pattern = try Regex("Docs/[A-Z_]+\\.md")
        for path in texts {
            let text = try String(contentsOfFile: path, encoding: .utf8)
            for match in text.matches(of: pattern) {
                let named = String(text[match.range])
                #expect(FileManager.default.fileExists(atPath: Self.root + "/" + named), "\(path) names \(named), which does not exist")
            }
        }
    }
}
