import EarshotSystem
import EarshotWire
import Foundation
import Testing

/// Draws for randomized tests (SplitMix64 reproduces from its seed on any platform and toolchain).
extension SplitMix64 {
    /// Uniform-enough integer in `range` (modulo bias is irrelevant here).
    mutating func int(_ range: ClosedRange<Int>) -> Int {
        let span = UInt64(range.upperBound - range.lowerBound) + 1
        return range.lowerBound + Int(next() % span)
    }

    /// True with probability `percent`/100.
    mutating func chance(_ percent: Int) -> Bool { int(0...99) < percent }

    mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8(truncatingIfNeeded: next()) } }

    mutating func pick<T>(_ items: [T]) -> T { items[int(0...(items.count - 1))] }
}

/// What decoding a whole byte stream produced: the frames in order, then the error that ended it
/// (from `next()` or from `finish()`), if any.
struct Outcome: Equatable, CustomStringConvertible {
    var frames: [Frame] = []
    var error: FrameError?
    /// Times `bufferedByteCount` exceeded header + data + payload limits + the chunk just fed.
    var boundViolations = 0
    /// Times a decoder that threw did not keep throwing the same error.
    var stickyViolations = 0
    /// Largest `bufferedByteCount` seen after taking out every complete frame.
    var maxBuffered = 0

    static func == (a: Outcome, b: Outcome) -> Bool { a.frames == b.frames && a.error == b.error }

    var description: String { "\(frames.count) frames, error: \(error.map { "\($0)" } ?? "none")" }
}

/// Feeds `bytes` to a fresh decoder in chunks whose sizes `nextChunk(remaining)` picks (clamped to
/// 1...remaining), taking out every complete frame after each chunk and calling `finish()` at the
/// end. Checks the buffering bound after every chunk and that errors are sticky.
func decodeStream(_ bytes: [UInt8], limits: FrameLimits = .default, nextChunk: (Int) -> Int = { $0 }) -> Outcome {
    var decoder = FrameDecoder(limits: limits)
    var outcome = Outcome()
    let bound = limits.maxHeaderBytes + limits.maxDataBytes + limits.maxPayloadBytes
    var offset = 0
    do throws(FrameError) {
        while offset < bytes.count {
            let remaining = bytes.count - offset
            let n = min(max(1, nextChunk(remaining)), remaining)
            decoder.feed(bytes[offset..<(offset + n)])
            offset += n
            if decoder.bufferedByteCount > bound + n { outcome.boundViolations += 1 }
            while let frame = try decoder.next() { outcome.frames.append(frame) }
            outcome.maxBuffered = max(outcome.maxBuffered, decoder.bufferedByteCount)
            if decoder.bufferedByteCount > bound { outcome.boundViolations += 1 }
        }
    } catch {
        outcome.error = error
        // A decoder whose next() threw keeps throwing the same error, whatever comes next.
        for attempt in 0..<3 {
            if attempt == 1 { decoder.feed(Array(#"{"type":"ping"}"#.utf8) + [0x0A]) }
            do throws(FrameError) {
                if attempt == 2 { try decoder.finish() } else { _ = try decoder.next() }
                outcome.stickyViolations += 1
            } catch let again {
                if again != error { outcome.stickyViolations += 1 }
            }
        }
        if decoder.bufferedByteCount != 0 { outcome.stickyViolations += 1 }
        return outcome
    }
    do throws(FrameError) {
        try decoder.finish()
    } catch {
        // End of stream inside a frame; finish() reports it the same way every time.
        outcome.error = error
        do throws(FrameError) {
            try decoder.finish()
            outcome.stickyViolations += 1
        } catch let again {
            if again != error { outcome.stickyViolations += 1 }
        }
    }
    return outcome
}

/// The error a fresh decoder with `limits` reports for `bytes` fed whole (after `finish()`).
func frameError(_ bytes: [UInt8], limits: FrameLimits = .default) -> FrameError? {
    decodeStream(bytes, limits: limits).error
}

func frameError(_ text: String, limits: FrameLimits = .default) -> FrameError? {
    frameError(Array(text.utf8), limits: limits)
}

/// Decodes one complete frame from `text`, which must hold exactly one frame.
func decodeOne(_ text: String, limits: FrameLimits = .default, sourceLocation: SourceLocation = #_sourceLocation) throws -> Frame {
    try decodeOne(Array(text.utf8), limits: limits, sourceLocation: sourceLocation)
}

func decodeOne(_ bytes: [UInt8], limits: FrameLimits = .default, sourceLocation: SourceLocation = #_sourceLocation) throws -> Frame {
    let outcome = decodeStream(bytes, limits: limits)
    #expect(outcome.error == nil, sourceLocation: sourceLocation)
    #expect(outcome.frames.count == 1, sourceLocation: sourceLocation)
    return try #require(outcome.frames.first, sourceLocation: sourceLocation)
}

/// The header line of encoded frame bytes, parsed as a JSON object.
func headerObject(of bytes: [UInt8]) throws -> [String: Any] {
    let newline = try #require(bytes.firstIndex(of: 0x0A))
    let object = try JSONSerialization.jsonObject(with: Data(bytes[..<newline]))
    return try #require(object as? [String: Any])
}
