// earshot-bench: SHA-256 verification throughput of `FileDigest` against coreutils `sha256sum`
// on the same file (issue 3, "Benchmarks": goal ≥ 1.0×).
//
//     swift build -c release --product earshot-bench && .build/release/earshot-bench [--size MiB] [--runs N] [--file PATH]
//
// The random input is created once and reused (default $EARSHOT_BENCH_DIR, else
// $XDG_CACHE_HOME/earshot-bench, else ~/.cache/earshot-bench). It is read once before timing so both
// contenders hash from the page cache; each is run N times and the best time counts.
import EarshotAssets
import Foundation

struct Options {
    var sizeMiB = 1024
    var runs = 3
    var file: String?

    init(_ arguments: [String]) {
        var rest = arguments.dropFirst()
        while let flag = rest.popFirst() {
            let value = rest.popFirst()
            switch (flag, value) {
            case ("--size", let value?): sizeMiB = Int(value) ?? 0
            case ("--runs", let value?): runs = Int(value) ?? 0
            case ("--file", let value?): file = value
            default: Self.usage()
            }
        }
        if sizeMiB <= 0 || runs <= 0 { Self.usage() }
    }

    static func usage() -> Never {
        FileHandle.standardError.write(Data("usage: earshot-bench [--size MiB] [--runs N] [--file PATH]\n".utf8))
        exit(64)
    }
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("earshot-bench: \(message)\n".utf8))
    exit(1)
}

func defaultDirectory() -> String {
    let environment = ProcessInfo.processInfo.environment
    if let dir = environment["EARSHOT_BENCH_DIR"], !dir.isEmpty { return dir }
    if let cache = environment["XDG_CACHE_HOME"], !cache.isEmpty { return cache + "/earshot-bench" }
    return NSHomeDirectory() + "/.cache/earshot-bench"
}

/// Creates `path` with `bytes` random bytes unless a file of that size is already there.
func ensureRandomFile(_ path: String, bytes: Int64) {
    if let size = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int64, size == bytes { return }
    try? FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    print("creating \(bytes >> 20) MiB of random data in \(path) …")
    let temporary = path + ".partial"
    let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    if fd < 0 { fail("cannot create \(temporary): \(String(cString: strerror(errno)))") }
    let random = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
    if random < 0 { fail("cannot open /dev/urandom") }
    defer { close(random) }
    let chunk = 4 << 20
    let buffer = UnsafeMutableRawPointer.allocate(byteCount: chunk, alignment: 4096)
    defer { buffer.deallocate() }
    var left = bytes
    while left > 0 {
        let count = read(random, buffer, Int(min(Int64(chunk), left)))
        if count <= 0 { fail("reading /dev/urandom failed") }
        if write(fd, buffer, count) != count { fail("write to \(temporary) failed") }
        left -= Int64(count)
    }
    close(fd)
    if rename(temporary, path) != 0 { fail("rename to \(path) failed") }
}

/// Reads the file once so that every timed run starts from a warm page cache.
func warm(_ path: String) {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    if fd < 0 { fail("cannot open \(path)") }
    defer { close(fd) }
    let size = 4 << 20
    let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 4096)
    defer { buffer.deallocate() }
    while read(fd, buffer, size) > 0 {}
}

func sha256sum(_ path: String) -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
    process.arguments = [path]
    let pipe = Pipe()
    process.standardOutput = pipe
    do { try process.run() } catch { fail("cannot run sha256sum: \(error)") }
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0, let line = String(data: output, encoding: .utf8),
          let digest = line.split(separator: " ").first else { fail("sha256sum failed") }
    return String(digest)
}

func earshot(_ path: String) -> String {
    do { return try FileDigest.sha256(path: path) } catch { fail("FileDigest failed: \(error)") }
}

/// The best wall-clock time of `runs` calls, and the digest they agreed on.
func best(_ runs: Int, _ body: () -> String) -> (seconds: Double, digest: String) {
    var fastest = Double.infinity
    var digest = ""
    let clock = ContinuousClock()
    for _ in 0..<runs {
        var result = ""
        let elapsed = clock.measure { result = body() }
        if !digest.isEmpty && result != digest { fail("digest changed between runs") }
        digest = result
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        fastest = min(fastest, seconds)
    }
    return (fastest, digest)
}

let options = Options(CommandLine.arguments)
let bytes = Int64(options.sizeMiB) << 20
let path = options.file ?? defaultDirectory() + "/random-\(options.sizeMiB)MiB.bin"
ensureRandomFile(path, bytes: bytes)
warm(path)

let baseline = best(options.runs) { sha256sum(path) }
let ours = best(options.runs) { earshot(path) }
guard baseline.digest == ours.digest else {
    fail("digests differ: sha256sum \(baseline.digest), FileDigest \(ours.digest)")
}

let mebibytes = Double(bytes) / Double(1 << 20)
func row(_ name: String, _ seconds: Double) -> String {
    let time = String(format: "%8.3f s", seconds)
    let rate = String(format: "%9.1f MiB/s", mebibytes / seconds)
    return name.padding(toLength: 22, withPad: " ", startingAt: 0) + time + "  " + rate
}
print("SHA-256 of \(options.sizeMiB) MiB (\(path)), best of \(options.runs), warm page cache")
print(row("sha256sum (coreutils)", baseline.seconds))
print(row("FileDigest (OpenSSL)", ours.seconds))
print(String(format: "ratio Earshot/sha256sum throughput: %.2f× (goal ≥ 1.0×)", baseline.seconds / ours.seconds))
print("digest \(ours.digest) (identical)")
