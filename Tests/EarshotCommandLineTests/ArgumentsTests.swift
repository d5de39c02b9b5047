import EarshotCommandLine
import Testing

/// The command-line parser: long options, short spellings, and nothing accepted silently.
@Suite struct ArgumentsTests {
    @Test func aShortSpellingReadsAsItsLongOption() throws {
        let arguments = try Arguments(["lm", "build", "data.json", "-o", "chess.bin", "--handle=h"], valued: ["output", "handle"], short: ["o": "output"])
        #expect(arguments.positional == ["lm", "build", "data.json"])
        #expect(arguments.value("output") == "chess.bin" && arguments.value("handle") == "h")
        #expect(throws: Arguments.ParseError.self) { try Arguments(["-o"], valued: ["output"], short: ["o": "output"]) }
        // A dash and one letter with no long option is a positional, as before (`-` is stdin).
        #expect(try Arguments(["-x", "-"], valued: ["output"], short: ["o": "output"]).positional == ["-x", "-"])
    }
}
