import Testing
import TestSupport

/// The benchmarks' command line (`BenchmarkOptions`): options with a value and flags without one.
@Suite struct BenchmarkOptionsTests {
    /// `vs-peers --unprompted --texts DIR`: a flag takes no value, so the option after it
    /// keeps its own.
    @Test func aFlagTakesNoValueAndLeavesTheNextOptionItsOwn() {
        let options = BenchmarkOptions(["vs-peers", "--runs", "2", "--unprompted", "--texts", "/tmp/t", "--models", "tiny.en"],
                                       names: ["runs", "texts", "models"], flags: ["unprompted", "other"], required: ["texts"], usage: "usage")
        #expect(options.flag("unprompted"))
        #expect(!options.flag("other"))
        #expect(options["texts"] == "/tmp/t")
        #expect(options.positive("runs", default: 3) == 2)
        #expect(options.models.map(\.name) == ["tiny.en"])
    }
}
