/// Lexical rules for archive member names and symlink targets, relative to the staging root.
enum MemberPath {
    /// The components of member `name` below staging; empty for staging itself (`.`, `./`).
    /// Throws ``ExtractionError/unsafePath(_:)`` for empty or absolute names and any `..` component.
    static func components(_ name: String) throws(ExtractionError) -> [String] {
        if name.isEmpty || name.hasPrefix("/") { throw .unsafePath(name) }
        var parts: [String] = []
        for part in name.split(separator: "/", omittingEmptySubsequences: true) {
            if part == "." { continue }
            if part == ".." { throw .unsafePath(name) }
            parts.append(String(part))
        }
        return parts
    }

    /// Whether symlink `target`, placed in directory `directory` (components below staging), stays
    /// inside staging at every step of a purely lexical resolution. Absolute and empty targets never do.
    static func staysInside(target: String, from directory: [String]) -> Bool {
        if target.isEmpty || target.hasPrefix("/") { return false }
        var depth = directory.count
        for part in target.split(separator: "/", omittingEmptySubsequences: true) {
            if part == "." { continue }
            if part == ".." {
                if depth == 0 { return false }
                depth -= 1
            } else {
                depth += 1
            }
        }
        return true
    }

    /// Whether `name` may be used as a single file directly inside staging.
    static func isPlainName(_ name: String) -> Bool {
        !name.isEmpty && name != "." && name != ".." && !name.contains("/") && !name.utf8.contains(0)
    }
}
