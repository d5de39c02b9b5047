import Earshot
import EarshotAssets
import EarshotCommandLine
import EarshotWire
import Foundation

/// `earshotctl publish oci://HOST[:PORT]/REPOSITORY:TAG [--catalog SOURCE] [--asset ID]... [--dry-run]`:
/// the daemon copies its verified catalog and the assets it lists into a registry.
struct PublishCommand {
    let request: PublishRequest

    init(_ arguments: Arguments, target: String) throws(UsageError) {
        let reference: OCIReference
        do {
            reference = try OCIReference.parse(target)
        } catch {
            throw UsageError("\(error)")
        }
        guard case .tag = reference.selector, target.split(separator: "/").last?.contains(":") == true else {
            throw UsageError("publish needs a tag to write: oci://HOST[:PORT]/REPOSITORY:TAG")
        }
        let assets = arguments.values("asset")
        request = PublishRequest(target: target, catalog: arguments.value("catalog"), assets: assets.isEmpty ? nil : assets, dryRun: arguments.has("dry-run"))
    }

    func run(_ connection: DaemonConnection, json: Bool) async throws -> ExitCode {
        let display = ProgressDisplay()
        let reply = try await connection.request(request, expecting: PublishReply.self) { frame in
            if !json, let event = try? frame.decode(InstallProgress.self) { display.show(event) }
        }
        display.finish()
        if json {
            Output.json(reply)
            return .success
        }
        Output.table(["BLOB", "DIGEST", "SIZE", reply.dryRun ? "WOULD" : "DONE"], reply.blobs.map { blob in
            [blob.name, String(blob.digest.prefix(19)), ProgressDisplay.bytes(blob.size),
             blob.action == .present ? "skip (present)" : blob.action == .pushed ? "pushed" : "push"]
        })
        let bytes = reply.blobs.filter { $0.action != .present }.map(\.size).reduce(0, +)
        if let digest = reply.manifestDigest {
            print("published catalog version \(reply.catalogVersion) to \(reply.target) (\(digest)); uploaded \(ProgressDisplay.bytes(bytes))")
        } else {
            print("would publish catalog version \(reply.catalogVersion) to \(reply.target), uploading \(ProgressDisplay.bytes(bytes))")
        }
        return .success
    }
}
