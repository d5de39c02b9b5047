import Foundation
import Testing
import TestSupport

/// `GET /metrics` through a daemon's HTTP socket, parsed by the PyPI `prometheus-client` parser:
/// each sample as `name{"label": "value", …}` (labels sorted, JSON) → value.
enum PrometheusScrape {
    private static let parser = """
    import sys, json
    from prometheus_client.parser import text_string_to_metric_families
    out = {}
    for family in text_string_to_metric_families(sys.stdin.read()):
        for sample in family.samples:
            key = sample.name + json.dumps(dict(sorted(sample.labels.items())), sort_keys=True)
            out[key] = sample.value
    print(json.dumps(out))
    """

    /// The HTTP socket beside a daemon's main socket (`[HTTP] Socket` unset).
    static func socket(of daemon: TestDaemon) -> String {
        (daemon.socket as NSString).deletingLastPathComponent + "/http.sock"
    }

    /// Scrapes `/metrics` on `socket` and parses it (a parser refusal fails the test).
    static func scrape(_ socket: String, in directory: TempDirectory) async throws -> [String: Double] {
        let input = directory.file("metrics-\(UUID().uuidString)")
        let headers = directory.file("metrics-headers-\(UUID().uuidString)")
        let fetch = try await ChildProcess.run("/usr/bin/curl", ["-sS", "--unix-socket", socket, "-D", headers, "-o", input, "-w", "%{http_code}", "http://earshot/metrics"], in: directory)
        try #require(fetch.stdout == "200", "GET /metrics: \(fetch.stdout) \(fetch.stderr)")
        let head = (try? String(contentsOfFile: headers, encoding: .utf8)) ?? ""
        try #require(head.lowercased().contains("content-type: text/plain; version=0.0.4"), "\(head)")
        let run = try await ChildProcess.run("/bin/sh", ["-c", "python3 -c \"$0\" < \"$1\"", parser, input], in: directory)
        try #require(run.status == 0, "the Prometheus parser refused /metrics: \(run.stderr)\n\((try? String(contentsOfFile: input, encoding: .utf8)) ?? "")")
        return try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Double])
    }

    /// The sum of every sample whose key starts with `prefix` (a name, or a name and labels).
    static func sum(_ metrics: [String: Double], _ prefix: String) -> Double {
        metrics.filter { $0.key.hasPrefix(prefix) }.values.reduce(0, +)
    }
}
