@testable import EarshotWhisper
import Testing

/// The decoder's self-attention cache as converter version 5 takes it: each layer's positions
/// time-major after a placeholder row, kept by the decoder, appended in place where no other
/// value has written past it, copied where beams reorder or share it.
@Suite struct SelfAttentionCacheTests {
    static let layers = 2, state = 3

    /// A decoder call's `new_k`/`new_v` outputs for `count` positions from `first` on, of `batch`
    /// sequences: every float tells its (kind, layer, position, sequence, element).
    static func pending(first: Int, count: Int, batch: Int, tag: Float = 0) throws -> (ORTValue, ORTValue) {
        func values(_ kind: Int) throws -> ORTValue {
            try ORTValue.floats([layers, count, batch, state]) { storage in
                for layer in 0..<layers {
                    for position in 0..<count {
                        for row in 0..<batch {
                            for element in 0..<state {
                                storage[((layer * count + position) * batch + row) * state + element] =
                                    Self.code(kind, layer, first + position, row, element) + tag
                            }
                        }
                    }
                }
            }
        }
        return (try values(0), try values(1))
    }

    static func code(_ kind: Int, _ layer: Int, _ position: Int, _ row: Int, _ element: Int) -> Float {
        Float(kind * 10_000 + layer * 1_000 + position * 100 + row * 10 + element)
    }

    /// Each layer's view as the decoder reads it: the placeholder row of zeros, then for every
    /// position each sequence's row; `rows[i]` names the sequence whose values row i holds.
    static func expectViews(_ cache: SelfAttentionCache, rows: [Int], tags: [Int: Float] = [:], sourceLocation: SourceLocation = #_sourceLocation) throws {
        let views = try cache.layerViews()
        for (kind, layerViews) in [views.keys, views.values].enumerated() {
            for (layer, view) in layerViews.enumerated() {
                #expect(view.shape == [1 + cache.stored, rows.count, state], sourceLocation: sourceLocation)
                let floats = Array(view.floats())
                #expect(floats.prefix(rows.count * state).allSatisfy { $0 == 0 }, "the placeholder row", sourceLocation: sourceLocation)
                var want: [Float] = Array(repeating: 0, count: rows.count * state)
                for position in 0..<cache.stored {
                    for row in rows {
                        for element in 0..<state { want.append(code(kind, layer, position, row, element) + (tags[position] ?? 0)) }
                    }
                }
                #expect(floats == want, sourceLocation: sourceLocation)
            }
        }
    }

    @Test func positionsAreStoredTimeMajorAfterAZeroRowAndAppendedInPlace() throws {
        let pool = SelfAttentionStorage.Pool()
        let empty = SelfAttentionCache(layers: Self.layers, batch: 2, state: Self.state, pool: pool)
        let (keys, values) = try Self.pending(first: 0, count: 3, batch: 2)
        let first = try empty.appending(keys: keys, values: values, count: 3).reordered([0, 1])
        #expect(first.stored == 3 && first.pending == nil)
        try Self.expectViews(first, rows: [0, 1])
        let (more, moreValues) = try Self.pending(first: 3, count: 1, batch: 2)
        let second = try first.appending(keys: more, values: moreValues, count: 1).reordered([0, 1])
        #expect(second.storage === first.storage, "unchanged rows append in place")
        try Self.expectViews(second, rows: [0, 1])
        try Self.expectViews(first, rows: [0, 1])
    }

    /// A start tried at two temperatures: both searches append to the same cache; the first
    /// writes in place, the second copies, and neither sees the other's position.
    @Test func aSharedCacheIsAppendedInPlaceOnceAndCopiedThen() throws {
        let pool = SelfAttentionStorage.Pool()
        let (keys, values) = try Self.pending(first: 0, count: 2, batch: 1)
        let start = try SelfAttentionCache(layers: Self.layers, batch: 1, state: Self.state, pool: pool)
            .appending(keys: keys, values: values, count: 2).reordered([0])
        let (a, aValues) = try Self.pending(first: 2, count: 1, batch: 1, tag: 0.5)
        let (b, bValues) = try Self.pending(first: 2, count: 1, batch: 1, tag: 0.25)
        let one = try start.appending(keys: a, values: aValues, count: 1).reordered([0])
        let other = try start.appending(keys: b, values: bValues, count: 1).reordered([0])
        #expect(one.storage === start.storage)
        #expect(other.storage !== start.storage)
        try Self.expectViews(one, rows: [0], tags: [2: 0.5])
        try Self.expectViews(other, rows: [0], tags: [2: 0.25])
        try Self.expectViews(start, rows: [0])
    }

    /// Beams that survive a step: rows taken in any order, repeated or dropped, stored and new
    /// positions alike.
    @Test func reorderedRowsTakeTheirSequencesPositions() throws {
        let pool = SelfAttentionStorage.Pool()
        let (keys, values) = try Self.pending(first: 0, count: 2, batch: 3)
        let stored = try SelfAttentionCache(layers: Self.layers, batch: 3, state: Self.state, pool: pool)
            .appending(keys: keys, values: values, count: 2).reordered([0, 1, 2])
        let (more, moreValues) = try Self.pending(first: 2, count: 1, batch: 3)
        let beams = try stored.appending(keys: more, values: moreValues, count: 1).reordered([2, 2, 0, 1])
        #expect(beams.batch == 4 && beams.stored == 3)
        try Self.expectViews(beams, rows: [2, 2, 0, 1])
        let fewer = try beams.reordered([3])
        try Self.expectViews(fewer, rows: [1])
    }

    /// Storage let go is taken again for the next storage of its size, and at most
    /// `Pool.limit` are kept.
    @Test func storageLetGoIsTakenAgain() throws {
        let pool = SelfAttentionStorage.Pool(), limit = SelfAttentionStorage.Pool.limit
        do {
            let storages = try (0..<(limit + 2)).map { _ in try pool.take(blocks: 4, positions: 5, batch: 2, state: 3) }
            #expect(storages.count == limit + 2 && pool.kept == 0)
            for storage in storages { storage.value.mutableFloats().initialize(repeating: 7) }
        }
        #expect(pool.kept == limit)
        let other = try pool.take(blocks: 4, positions: 40, batch: 2, state: 3)
        #expect(pool.kept == limit && other.capacity > 40, "another size is made afresh")
        let again = try (0..<limit).map { _ in try pool.take(blocks: 4, positions: 9, batch: 2, state: 3) }
        #expect(pool.kept == 0, "the same capacity (rounded up) is taken again")
        #expect(again.allSatisfy { Array($0.value.floats().prefix(2 * 3)) == Array(repeating: 0, count: 6) }, "placeholders zeroed")
    }
}
