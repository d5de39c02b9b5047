@testable import EarshotDaemon
import EarshotWire
import Foundation
import Testing
import TestSupport

@Suite struct DaemonConfigTests {
    @Test func defaultsComeFromTheRegistry() {
        let config = DaemonConfig()
        #expect(config[.daemonSocketMode] == "0666")
        #expect(config.int(.limitsMaxConnections) == 256)
        #expect(config.frameLimits == FrameLimits.default)
        #expect(config.entries.count == ConfigRegistry.keys.count)
        #expect(config.entries.allSatisfy { $0.source == "default" })
    }

    @Test func parsesSectionsCommentsContinuationsAndWhitespace() {
        var config = DaemonConfig()
        config.parse("""
            # comment
            ; another comment
            [Daemon]
              LogLevel = debug
            AdminGroup=wheel\\
            s
            [Limits]
            MaxConnections=12
            """, source: "a.conf")
        #expect(config.warnings.isEmpty)
        #expect(config[.daemonLogLevel] == "debug")
        #expect(config[.daemonAdminGroup] == "wheel s")
        #expect(config.int(.limitsMaxConnections) == 12)
        #expect(config.entries.first { $0.key == "Limits.MaxConnections" }?.source == "a.conf:8")
    }

    @Test func badKeysAndValuesWarnWithFileAndLineAndKeepThePreviousValue() {
        var config = DaemonConfig()
        config.parse("""
            [Limits]
            MaxConnections=10
            MaxConnections=lots
            Frobnicate=1
            [Nope]
            Key=1
            no equals sign here
            [Daemon
            """, source: "b.conf")
        #expect(config.int(.limitsMaxConnections) == 10)
        #expect(config.warnings.contains { $0.hasPrefix("b.conf:3: Limits.MaxConnections=lots") && $0.contains("keeping 10") })
        #expect(config.warnings.contains { $0 == "b.conf:4: unknown key Limits.Frobnicate" })
        #expect(config.warnings.contains { $0.hasPrefix("b.conf:5: unknown section [Nope]") })
        #expect(!config.warnings.contains { $0.hasPrefix("b.conf:6") }) // keys of an unknown section: one warning
        #expect(config.warnings.contains { $0.hasPrefix("b.conf:7: expected Key=Value") })
        #expect(config.warnings.contains { $0.hasPrefix("b.conf:8: malformed section header") })
    }

    @Test func keyOutsideASectionWarns() {
        var config = DaemonConfig()
        config.parse("LogLevel=debug\n", source: "c.conf")
        #expect(config[.daemonLogLevel] == "info")
        #expect(config.warnings == ["c.conf:1: 'LogLevel' is outside any [Section]"])
    }

    @Test func dropInsAreReadInLexicalOrderAfterTheMainFile() throws {
        let dir = try TempDirectory()
        defer { dir.remove() }
        let main = try dir.write("earshotd.conf", "[Limits]\nMaxConnections=5\n[Daemon]\nLogLevel=error\n")
        try dir.write("earshotd.conf.d/20-late.conf", "[Limits]\nMaxConnections=7\n")
        try dir.write("earshotd.conf.d/10-early.conf", "[Limits]\nMaxConnections=6\n[Daemon]\nLogLevel=notice\n")
        try dir.write("earshotd.conf.d/99-ignored.txt", "[Limits]\nMaxConnections=99\n")
        let config = DaemonConfig.load(path: main)
        #expect(config.int(.limitsMaxConnections) == 7)
        #expect(config[.daemonLogLevel] == "notice")
        #expect(config.files.map { ($0 as NSString).lastPathComponent } == ["earshotd.conf", "10-early.conf", "20-late.conf"])
        #expect(config.warnings.isEmpty)
    }

    @Test func missingMainFileIsNotAnError() {
        let config = DaemonConfig.load(path: "/nonexistent/earshotd.conf")
        #expect(config.warnings.isEmpty)
        #expect(config.files.isEmpty)
    }

    @Test func shippedConfigIsTheRegistryTemplate() throws {
        let shipped = try String(contentsOfFile: BuiltProducts.packageRoot + "/Config/earshotd.conf", encoding: .utf8)
        #expect(shipped == ConfigRegistry.template, "regenerate with: .build/debug/earshotd --config-template > Config/earshotd.conf")
    }

    @Test func templateListsEveryKeyAtAValidDefault() {
        var section = ""
        var listed: [String: [String]] = [:]
        for line in ConfigRegistry.template.split(separator: "\n").map(String.init) {
            if line.hasPrefix("[") { section = String(line.dropFirst().dropLast()) }
            if line.hasPrefix("#"), let eq = line.firstIndex(of: "="), !line.contains(" ") {
                listed["\(section).\(line.dropFirst()[..<eq])", default: []].append(String(line[line.index(after: eq)...]))
            }
        }
        #expect(listed.count == ConfigRegistry.keys.count)
        var config = DaemonConfig()
        for key in ConfigRegistry.keys {
            let values = listed[key.id] ?? []
            #expect(values.joined(separator: " ") == key.defaultValue, "\(key.id)")
            for value in values where !value.isEmpty {
                #expect(config.set(key.id, value, source: "template") == nil, "\(key.id)=\(value)")
            }
        }
    }

    @Test func repeatableKeysAccumulateAndAnEmptyAssignmentClears() {
        var config = DaemonConfig()
        #expect(config.values(.catalogURL) == [EmbeddedDefaults.catalogURL])
        config.parse("[Catalog]\nURL=https://a.example/c.json\nURL=https://b.example/c.json\n", source: "a.conf")
        #expect(config.values(.catalogURL) == ["https://a.example/c.json", "https://b.example/c.json"])
        config.parse("[Catalog]\nURL=\nURL=file:///srv/c.json\nURL=ftp://nope\n", source: "b.conf")
        #expect(config.values(.catalogURL) == ["file:///srv/c.json"])
        #expect(config.warnings.contains { $0.hasPrefix("b.conf:4: Catalog.URL=ftp://nope") })
        config.override(.catalogURL, values: ["https://cli.example/c.json"], source: "command line")
        #expect(config.values(.catalogURL) == ["https://cli.example/c.json"])
        #expect(config.entries.first { $0.key == "Catalog.URL" }?.source == "command line")
    }

    @Test func pathsFollowFlagsThenConfigThenSystemdThenXDG() {
        let env = ["HOME": "/home/u", "XDG_RUNTIME_DIR": "/run/user/1000", "STATE_DIRECTORY": "/var/lib/earshot:/other", "XDG_STATE_HOME": "/xdg/state"]
        var config = DaemonConfig()
        let system = DaemonPaths.resolve(mode: .system, socketFlag: nil, stateFlag: nil, cacheFlag: nil, config: config, environment: env)
        #expect(system.socket == "/run/earshot/earshot.sock")
        #expect(system.stateDirectory == "/var/lib/earshot")
        #expect(system.cacheDirectory == "/var/cache/earshot")
        let user = DaemonPaths.resolve(mode: .user, socketFlag: nil, stateFlag: nil, cacheFlag: nil, config: config, environment: env)
        #expect(user.socket == "/run/user/1000/earshot/earshot.sock")
        #expect(user.stateDirectory == "/xdg/state/earshot")
        #expect(user.cacheDirectory == "/home/u/.cache/earshot")
        config.set("Daemon.CacheDirectory", "/srv/cache", source: "test")
        let configured = DaemonPaths.resolve(mode: .user, socketFlag: "/tmp/s.sock", stateFlag: "/tmp/state", cacheFlag: nil, config: config, environment: env)
        #expect(configured.socket == "/tmp/s.sock")
        #expect(configured.stateDirectory == "/tmp/state")
        #expect(configured.cacheDirectory == "/srv/cache")
    }

    @Test func appIDValidation() {
        #expect(DaemonHarness.isValidAppID("com.example.Notes-2_b"))
        #expect(!DaemonHarness.isValidAppID(""))
        #expect(!DaemonHarness.isValidAppID("has space"))
        #expect(!DaemonHarness.isValidAppID("../etc"  + "/passwd"))
        #expect(!DaemonHarness.isValidAppID(String(repeating: "a", count: 256)))
    }
}

/// Issue 8, defect 10 — `SocketMode` failed open: a bad value was only a warning.
@Suite struct SocketModeFailsOpenConfigTests {
    @Test func badSocketModeIsAnErrorNotAWarning() {
        var config = DaemonConfig()
        config.parse("[Daemon]\nSocketMode=0668\n[Limits]\nMaxConnections=lots\n", source: "m.conf")
        #expect(config.errors == ["m.conf:2: Daemon.SocketMode=0668: expected an octal file mode such as 0660"])
        #expect(!config.warnings.contains { $0.contains("SocketMode") })
        #expect(config.warnings.contains { $0.hasPrefix("m.conf:4: Limits.MaxConnections=lots") }) // other keys still only warn
        config.parse("[Daemon]\nSocketMode=0640\n", source: "n.conf")
        #expect(config[.daemonSocketMode] == "0640")
    }

    /// Issue 31: look-ups name a `Setting`, never a string; each one's name is its definition's
    /// `Section.Name`, and no two are the same key.
    @Test func everySettingNamesItsOwnDefinitionOnce() {
        for setting in Setting.allCases { #expect(setting.rawValue == setting.key.id, "\(setting)") }
        #expect(Set(ConfigRegistry.keys.map { $0.id.lowercased() }).count == Setting.allCases.count)
        var config = DaemonConfig()
        config.parse("[Analysis]\nSpeculativeDecode=no\n[Catalog]\nURL=file:///a.json\nURL=file:///b.json\n", source: "a.conf")
        #expect(config.values(.catalogURL) == ["file:///a.json", "file:///b.json"])
        #expect(!config.flag(.analysisSpeculativeDecode) && config.seconds(.daemonShutdownTimeoutSec) == 10)
        config.override(.catalogURL, values: ["file:///c.json"], source: "command line")
        #expect(config.values(.catalogURL) == ["file:///c.json"])
    }
}
