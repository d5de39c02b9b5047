import EarshotWire
import Foundation
import Testing
import TestSupport

/// Privileges are never self-declared: what a non-admin peer (a real second uid, 65534) may not
/// claim by setting a field.
@Suite struct PrivilegeTests {
    /// Issue 8, defect 13: any client could set `ignores_resource_limits` and take every slot up to
    /// the hard cap.
    @Test func ignoresResourceLimitsIsNotSelfDeclared() async throws {
        try await AssetFixture.with { fixture in
            let en = try await fixture.build(.random("asr-en", locales: ["en-US"], bytes: 64 << 10, seed: 60))
            try await fixture.publishCatalog(version: 1, assets: [en])
            let daemon = try await fixture.startDaemonWithCatalog("")
            let module = ModuleConfiguration(kind: .transcriber, locale: "en-US")
            let (_, replies) = try await fixture.runAsNobody(daemon, appID: "org.example.nobody", [
                try Frame(AnalyzerOpen(modules: [module], options: AnalysisOptions(ignoresResourceLimits: true))),
                try Frame(AnalyzerOpen(modules: [module])),
            ])
            #expect(replies[0].errorCode == .permissionDenied, "\(replies[0].type) \(replies[0].errorText ?? "")")
            #expect(replies[0].errorText?.contains("ignore resource limits") == true)
            // Without the claim the request goes on to the usual checks (the asset is not installed).
            #expect(replies[1].errorCode != .permissionDenied, "\(replies[1].type) \(replies[1].errorText ?? "")")
            // An admin (root, the daemon's own user here) may.
            let admin = try TestConnection(daemon.socket)
            defer { admin.close() }
            try await admin.hello("org.example.admin")
            let reply = try await admin.call(AnalyzerOpen(id: "o1", modules: [module], options: AnalysisOptions(ignoresResourceLimits: true)))
            #expect(reply.errorCode != .permissionDenied, "\(reply)")
        }
    }
}
