import EarshotAssets
import EarshotCommandLine
import EarshotWire
import Foundation

/// `earshotctl catalog add-asset URL …`: the arguments for ``CatalogAuthoring``, its entry printed
/// or merged into an unsigned catalog for an admin to sign. Talks to no daemon.
struct AddAssetCommand {
    let description: CatalogAuthoring.Description
    /// `--catalog FILE`: the unsigned catalog the entry is merged into (nil: print the entry).
    let catalog: String?

    init(_ arguments: Arguments) throws(UsageError) {
        do {
            description = try Self.describe(arguments)
        } catch {
            throw UsageError(error)
        }
        catalog = arguments.value("catalog")
    }

    func run() async throws -> ExitCode {
        let display = ProgressDisplay()
        let description = description
        let entry = try await CatalogAuthoring.entry(for: description) { progress in
            display.show(InstallProgress(id: nil, asset: description.id, version: 0, phase: .downloading,
                                         bytesDone: progress.bytesDone, bytesTotal: progress.bytesTotal ?? 0))
        }
        display.finish()
        let encoder = Catalog.makeEncoder()
        if let path = catalog {
            let existing = try FileManager.default.contents(atPath: path).map { try Catalog.decode(from: $0) }
            let merged = try CatalogAuthoring.merge(entry, into: existing)
            try Data(encoder.encode(merged)).write(to: URL(fileURLWithPath: path), options: .atomic)
            Output.note("wrote \(path) (catalog version \(merged.version)); sign it with: minisign -Sm \(path)")
        } else {
            print(String(decoding: try encoder.encode(entry), as: UTF8.self))
        }
        return .success
    }

    static func describe(_ arguments: Arguments) throws -> CatalogAuthoring.Description {
        typealias Problem = CatalogAuthoring.Problem
        guard arguments.positional.count == 3 else { throw Problem(description: "catalog add-asset needs a URL") }
        guard let id = arguments.value("id") else { throw Problem(description: "--id is required") }
        guard let kind = arguments.value("kind").flatMap(AssetKind.init) else { throw Problem(description: "--kind transcriber|dictation|detector is required") }
        guard let engine = arguments.value("engine") else { throw Problem(description: "--engine is required (one of \(EngineKind.allCases.map(\.rawValue).joined(separator: ", ")))") }
        let format = try arguments.value("format").map { try ArchiveFormat(rawValue: $0).orThrow(Problem(description: "unknown --format \($0)")) }
        var roles: [String: String] = [:]
        for role in arguments.values("role") {
            let parts = role.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw Problem(description: "--role needs ROLE=PATH, got \(role)") }
            roles[parts[0]] = parts[1]
        }
        guard let version = Int(arguments.value("version") ?? "1") else { throw Problem(description: "--version needs a whole number") }
        return CatalogAuthoring.Description(url: arguments.positional[2], id: id, version: version, kind: kind, engine: engine,
                                            locales: arguments.values("locale"), roles: roles, license: arguments.value("license") ?? "unknown", format: format)
    }
}
