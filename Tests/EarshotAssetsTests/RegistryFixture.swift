@testable import EarshotAssets
import EarshotSystem
import EarshotWire
import Foundation
import Testing
import TestSupport

/// An ``InventoryFixture`` (signed standard catalog, served from `file://`) plus more daemons'
/// asset services, each with its own state and cache directories, reading catalogs from registries.
struct RegistryFixture {
    let inventory: InventoryFixture

    static func make() async throws -> RegistryFixture {
        let inventory = try await InventoryFixture.make()
        try await inventory.publishStandardCatalog()
        return RegistryFixture(inventory: inventory)
    }

    /// The settings of daemon `name`: its own directories under the fixture, the fixture's keys.
    func settings(_ name: String, catalogs: [String], registry: RegistrySettings = RegistrySettings(),
                  download: DownloadOptions = .testing) -> AssetSettings {
        var settings = AssetSettings(stateDirectory: inventory.directory.file("\(name)/state"), cacheDirectory: inventory.directory.file("\(name)/cache"),
                                     catalogURLs: catalogs, keyDirectories: [inventory.keysDirectory], download: download)
        settings.registry = registry
        return settings
    }

    /// A started service for daemon `name` (catalogs not refreshed yet), on `clock`.
    func service(_ name: String, catalogs: [String], registry: RegistrySettings = RegistrySettings(), download: DownloadOptions = .testing,
                 clock: any ServiceClock = SystemServiceClock()) async throws -> ServiceHandle {
        let service = try AssetService(settings: settings(name, catalogs: catalogs, registry: registry, download: download), clock: clock, log: inventory.logs.record)
        try await service.start()
        return ServiceHandle(service)
    }

    /// The publishing daemon: the fixture's own catalog source, refreshed.
    func publisher(registry: RegistrySettings = RegistrySettings()) async throws -> ServiceHandle {
        let handle = try await service("publisher", catalogs: [inventory.catalogURL], registry: registry)
        let refreshed = await handle.service.refreshCatalogs()
        #expect(refreshed.allSatisfy { $0.outcome == .updated || $0.outcome == .unchanged } && refreshed.first?.version != nil, "\(refreshed)")
        return handle
    }

    /// Refreshes `daemon`'s catalogs (each must be stored anew), starts its job loop and installs
    /// `module` for `appA`.
    func refreshAndInstall(_ daemon: ServiceHandle, _ module: ModuleConfiguration) async throws -> InstallOutcome {
        let refreshed = await daemon.service.refreshCatalogs()
        #expect(refreshed.allSatisfy { $0.outcome == .updated }, "\(refreshed)")
        daemon.startRunning()
        return try await daemon.service.install([module], for: appA) { _ in }
    }

    /// The signed catalog document and its minisign signature, as published.
    func signedCatalog() throws -> (catalog: [UInt8], signature: [UInt8]) {
        (Array(try Data(contentsOf: URL(fileURLWithPath: inventory.catalogPath))),
         Array(try Data(contentsOf: URL(fileURLWithPath: inventory.catalogPath + ".minisig"))))
    }

    /// The standard catalog's entries, by id.
    func entries() async throws -> [String: CatalogAsset] {
        let catalog = try Catalog.parse(Data(contentsOf: URL(fileURLWithPath: inventory.catalogPath)))
        return Dictionary(uniqueKeysWithValues: catalog.assets.map { ($0.id, $0) })
    }

    /// Removes the catalog's own download sources, so only a registry can serve the assets.
    func removeOriginalSources() throws {
        for name in try FileManager.default.contentsOfDirectory(atPath: inventory.directory.file("src")) where !name.hasSuffix(".d") {
            try FileManager.default.removeItem(atPath: inventory.directory.file("src/" + name))
        }
    }

    /// A credentials file in the `auths` format, mode 0600 (or `mode`).
    func authFile(_ entries: [String: (String, String)], mode: mode_t = 0o600) throws -> String {
        let auths = entries.map { host, credentials in
            "\"\(host)\": {\"auth\": \"\(Data("\(credentials.0):\(credentials.1)".utf8).base64EncodedString())\"}"
        }
        let path = try inventory.directory.write("auth-\(UUID().uuidString.prefix(6)).json", "{\"auths\": {\(auths.joined(separator: ", "))}}")
        chmod(path, mode)
        return path
    }

    func remove() { inventory.remove() }
}
