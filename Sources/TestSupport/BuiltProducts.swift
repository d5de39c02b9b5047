import EarshotSystem
import Foundation

/// The package's built executables, found beside the running test binary.
public enum BuiltProducts {
    /// The build products directory (e.g. `.build/debug`).
    public static var directory: String {
        var dir = ProcessFacts.executableDirectory
        // The test runner may live inside `EarshotPackageTests.xctest/…`.
        while !dir.isEmpty, dir != "/", !FileManager.default.isExecutableFile(atPath: dir + "/earshotd") {
            dir = (dir as NSString).deletingLastPathComponent
        }
        return dir
    }

    /// The path of executable `name` (`earshotd`, `earshotctl`, `earshot`).
    public static func path(_ name: String) -> String { directory + "/" + name }

    /// The package root (where Package.swift is).
    public static var packageRoot: String {
        var dir = directory
        while dir != "/", !FileManager.default.fileExists(atPath: dir + "/Package.swift") {
            dir = (dir as NSString).deletingLastPathComponent
        }
        return dir
    }
}
