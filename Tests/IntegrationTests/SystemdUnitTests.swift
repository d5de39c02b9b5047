import Foundation
import Testing
import TestSupport

/// The shipped units, sysusers/tmpfiles snippets and installer, checked by systemd's own tools.
@Suite struct SystemdUnitTests {
    @Test func unitsVerifyAndStayWithinTheirExposureCeilings() async throws {
        let dir = try TempDirectory()
        defer { dir.remove() }
        let script = BuiltProducts.packageRoot + "/Tests/systemd/verify-units.sh"
        let result = try await ChildProcess.run("/bin/bash", [script], in: dir, timeout: .seconds(120))
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.contains("Overall exposure level for earshotd.service"))
        #expect(result.stdout.contains("verify-units: all checks passed"))
    }
}
