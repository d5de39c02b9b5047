import Foundation
import Testing
import TestSupport

/// Module boundaries the build must keep (DESIGN §2, issue 8 "Layering").
@Suite struct LayeringTests {
    /// How many of `product`'s symbols (`nm`) contain `marker`.
    static func symbols(_ product: String, containing marker: String) async throws -> Int {
        let directory = try TempDirectory("eslayer")
        defer { directory.remove() }
        let run = try await ChildProcess.run("/usr/bin/nm", [BuiltProducts.path(product)], in: directory, timeout: .seconds(120))
        try #require(run.status == 0, "nm \(product): \(run.stderr)")
        return run.stdout.split(separator: "\n").filter { $0.contains(marker) }.count
    }

    /// The daemon must not link the client library: its symbols (Swift mangling `$s7Earshot…`)
    /// appear in `earshot` but never in `earshotd`.
    @Test func theDaemonDoesNotLinkTheClientLibrary() async throws {
        #expect(try await Self.symbols("earshot", containing: " $s7Earshot") > 0, "the check finds the client library where it is linked")
        #expect(try await Self.symbols("earshotd", containing: " $s7Earshot") == 0)
    }

    /// ONNX Runtime (Earshot's Whisper decoder and sherpa-onnx's detector) is linked into the
    /// engine process only: earshotd never maps it, so its memory leaves with the engine.
    @Test func theEngineAloneLinksONNXRuntime() async throws {
        let directory = try TempDirectory("eslayer")
        defer { directory.remove() }
        func needsONNXRuntime(_ product: String) async throws -> Bool {
            let run = try await ChildProcess.run("/usr/bin/nm", ["-D", "--undefined-only", BuiltProducts.path(product)], in: directory, timeout: .seconds(120))
            try #require(run.status == 0, "nm -D \(product): \(run.stderr)")
            return run.stdout.split(separator: "\n").contains { $0.hasSuffix(" OrtGetApiBase") || $0.contains(" OrtGetApiBase@") }
        }
        #expect(try await needsONNXRuntime("earshot-engine"))
        #expect(try await needsONNXRuntime("earshotd") == false)
    }

    /// Issue 31: the engine link (earshotd ↔ earshot-engine) is not a client protocol, so its
    /// module (`$s17EarshotEngineLink…`) is linked by the daemon and the engine, never by a CLI.
    @Test func theEngineLinkStaysOutOfTheClients() async throws {
        let link = " $s17EarshotEngineLink"
        #expect(try await Self.symbols("earshot-engine", containing: link) > 0, "the check finds the link where it is linked")
        #expect(try await Self.symbols("earshotd", containing: link) > 0)
        for client in ["earshot", "earshotctl"] { #expect(try await Self.symbols(client, containing: link) == 0, "\(client) links the engine link") }
    }
}
