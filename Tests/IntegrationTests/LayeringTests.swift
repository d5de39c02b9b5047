import Foundation
import Testing
import TestSupport

/// Module boundaries the build must keep (DESIGN §2, issue 8 "Layering").
@Suite struct LayeringTests {
    /// The daemon must not link the client library: its symbols (Swift mangling `$s7Earshot…`)
    /// appear in `earshot` but never in `earshotd`.
    @Test func theDaemonDoesNotLinkTheClientLibrary() async throws {
        let directory = try TempDirectory("eslayer")
        defer { directory.remove() }
        func clientSymbols(_ product: String) async throws -> Int {
            let run = try await ChildProcess.run("/usr/bin/nm", [BuiltProducts.path(product)], in: directory, timeout: .seconds(120))
            try #require(run.status == 0, "nm \(product): \(run.stderr)")
            return run.stdout.split(separator: "\n").filter { $0.contains(" $s7Earshot") }.count
        }
        #expect(try await clientSymbols("earshot") > 0, "the check finds the client library where it is linked")
        #expect(try await clientSymbols("earshotd") == 0)
    }

    /// The engine process defines `sincos` in its dynamic symbol table, so sherpa-onnx's Whisper
    /// front end (whose FFT calls sincos ~10 000 times a frame) binds to the cache (CSincosCache)
    /// instead of libm's; earshotd, which links no engine, does not carry it.
    @Test func theEngineInterposesItsSincosCacheAndTheDaemonDoesNot() async throws {
        let directory = try TempDirectory("eslayer")
        defer { directory.remove() }
        func definesSincos(_ product: String) async throws -> Bool {
            let run = try await ChildProcess.run("/usr/bin/nm", ["-D", "--defined-only", BuiltProducts.path(product)], in: directory, timeout: .seconds(120))
            try #require(run.status == 0, "nm -D \(product): \(run.stderr)")
            return run.stdout.split(separator: "\n").contains { $0.hasSuffix(" T sincos") }
        }
        #expect(try await definesSincos("earshot-engine"))
        #expect(try await definesSincos("earshotd") == false)
    }
}
