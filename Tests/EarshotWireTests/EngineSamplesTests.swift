import EarshotEngineLink
import EarshotWire
import Testing

/// Audio on the link to the engine process: float samples as payload bytes and back.
@Suite struct EngineSamplesTests {
    @Test func samplesSurviveTheRoundTripFromAnArrayOrASlice() {
        let samples: [Float] = (0..<4000).map { Float($0 % 200) / 100 - 1 }
        let slice = samples[1234..<2834]
        #expect(EngineSamples.bytes(samples).count == samples.count * 4)
        #expect(EngineSamples.samples(EngineSamples.bytes(samples)) == samples)
        #expect(EngineSamples.samples(EngineSamples.bytes(slice)) == Array(slice))
        #expect(EngineSamples.bytes(slice) == EngineSamples.bytes(Array(slice)))
        // A trailing partial sample is dropped, not read past the end.
        #expect(EngineSamples.samples(EngineSamples.bytes(samples) + [1, 2]) == samples)
    }
}
