import Earshot
import EarshotCommandLine
import Foundation

/// `earshot devices [--json]`: the sound server's sources, what `transcribe --mic --device` takes.
enum DevicesCommand {
    /// One source as `--json` prints it.
    struct Listing: Encodable {
        var name: String
        var description: String
        var isDefault: Bool
        var monitor: Bool
        enum CodingKeys: String, CodingKey { case name, description, isDefault = "default", monitor }
    }

    static func run(json: Bool) async throws {
        let listings = try await AVCaptureDevice.soundServerDevices().map {
            Listing(name: $0.uniqueID, description: $0.localizedName, isDefault: $0.isSoundServerDefault, monitor: $0.isMonitor)
        }
        if json { return Output.json(listings) }
        for listing in listings {
            let marks = [listing.isDefault ? "default" : nil, listing.monitor ? "monitor" : nil].compactMap { $0 }
            print([listing.name, listing.description, marks.joined(separator: ",")].filter { !$0.isEmpty }.joined(separator: "\t"))
        }
    }
}
