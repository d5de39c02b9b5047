import Foundation

/// A C library linked into this process and the version it reports.
public struct LinkedLibrary: Sendable, Hashable, Codable {
    public var name: String
    public var version: String
    public init(name: String, version: String) {
        self.name = name
        self.version = version
    }

    /// Identifies a loaded shared library by file name (e.g. `libsystemd.so`) for libraries
    /// without a version API: the package version from its ELF package note
    /// (`.note.package`, type 0xcafe1a7e) when present, else the resolved file name.
    public static func identify(sharedObject prefix: String, name: String) -> LinkedLibrary {
        guard let path = loadedPath(prefix) else { return LinkedLibrary(name: name, version: "not loaded") }
        if let version = packageNoteVersion(path) { return LinkedLibrary(name: name, version: version) }
        let resolved = (try? FileManager.default.destinationOfSymbolicLink(atPath: path)) ?? path
        return LinkedLibrary(name: name, version: (resolved as NSString).lastPathComponent)
    }

    static func loadedPath(_ prefix: String) -> String? {
        // /proc files report size 0, so read to the end rather than by size.
        guard let handle = FileHandle(forReadingAtPath: "/proc/self/maps"),
              let data = try? handle.readToEnd(), let maps = String(data: data, encoding: .utf8) else { return nil }
        try? handle.close()
        for line in maps.split(separator: "\n") {
            guard let slash = line.firstIndex(of: "/") else { continue }
            let path = String(line[slash...])
            if (path as NSString).lastPathComponent.hasPrefix(prefix) { return path }
        }
        return nil
    }

    /// Reads the `version` of the FDO package note from a 64-bit little-endian ELF file.
    static func packageNoteVersion(_ path: String) -> String? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        guard let header = try? handle.read(upToCount: 64), header.count == 64,
              header.starts(with: [0x7F, 0x45, 0x4C, 0x46]), header[4] == 2, header[5] == 1 else { return nil }
        func int(_ d: Data, _ at: Int, _ size: Int) -> Int {
            (0..<size).reduce(0) { $0 | Int(d[d.startIndex + at + $1]) << (8 * $1) }
        }
        let phoff = int(header, 0x20, 8), phentsize = int(header, 0x36, 2), phnum = int(header, 0x38, 2)
        guard (try? handle.seek(toOffset: UInt64(phoff))) != nil,
              let table = try? handle.read(upToCount: phentsize * phnum), table.count == phentsize * phnum else { return nil }
        for i in 0..<phnum {
            let entry = table.subdata(in: (i * phentsize)..<((i + 1) * phentsize))
            guard int(entry, 0, 4) == 4 else { continue } // PT_NOTE
            let offset = int(entry, 8, 8), size = int(entry, 32, 8)
            guard size < 1 << 20, (try? handle.seek(toOffset: UInt64(offset))) != nil,
                  let notes = try? handle.read(upToCount: size), notes.count == size else { continue }
            var at = 0
            while at + 12 <= notes.count {
                let namesz = int(notes, at, 4), descsz = int(notes, at + 4, 4), type = int(notes, at + 8, 4)
                let nameStart = at + 12, descStart = nameStart + (namesz + 3) & ~3
                guard descStart + descsz <= notes.count else { break }
                if type == 0xCAFE_1A7E, namesz == 4, notes[notes.startIndex + nameStart] == UInt8(ascii: "F") {
                    let desc = notes.subdata(in: descStart..<(descStart + descsz)).prefix { $0 != 0 }
                    if let object = try? JSONSerialization.jsonObject(with: desc) as? [String: Any],
                       let version = object["version"] as? String {
                        return version
                    }
                }
                at = descStart + (descsz + 3) & ~3
            }
        }
        return nil
    }
}
