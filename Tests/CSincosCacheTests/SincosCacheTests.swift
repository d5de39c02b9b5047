import CSincosCache
import Foundation
import Synchronization
import Testing

/// The engine process's `sincos` cache: libm's values bit for bit (first call and cached), for
/// special arguments too, from many threads at once, and still when the table is full; and the
/// process's `sincos` symbol is the cache, as the engine's shared libraries see it.
@Suite struct SincosCacheTests {
    typealias Sincos = @convention(c) (Double, UnsafeMutablePointer<Double>?, UnsafeMutablePointer<Double>?) -> Void

    /// What a shared library's call to `sincos` binds to in this process.
    static func processSincos() throws -> Sincos {
        // RTLD_DEFAULT (a null handle): the global scope, as a shared library's PLT sees it.
        let symbol = try #require(dlsym(nil, "sincos"), "no sincos in the global scope")
        return unsafeBitCast(symbol, to: Sincos.self)
    }

    static func cached(_ x: Double, _ fn: Sincos) -> (UInt64, UInt64) {
        var s = 0.0, c = 0.0
        fn(x, &s, &c)
        return (s.bitPattern, c.bitPattern)
    }

    static func libm(_ x: Double) -> (UInt64, UInt64) {
        var s = 0.0, c = 0.0
        earshot_sincos_uncached(x, &s, &c)
        return (s.bitPattern, c.bitPattern)
    }

    /// The angles kaldi-native-fbank's Whisper FFT uses (float-rounded twiddles of the 400-, 200-,
    /// 100- and 50-point stages, and the 25-point DFT's k·n multiples), plus ordinary values.
    static let angles: [Double] = {
        var values: [Double] = []
        for n in [400, 200, 100, 50] {
            for k in 0..<(n / 2) { values.append(Double(Float(2 * Double.pi * Double(k) / Double(n)))) }
        }
        for k in 0..<25 {
            for n in 0..<25 { values.append(Double(Float(2 * Double.pi / 25 * Double(k) * Double(n)))) }
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<500 { values.append(Double.random(in: -1000...1000, using: &generator)) }
        return values
    }()

    @Test func theProcessSincosIsTheCache() throws {
        let fn = try Self.processSincos()
        #expect(unsafeBitCast(fn, to: UnsafeRawPointer.self) == UnsafeRawPointer(earshot_sincos_cache_function()))
    }

    @Test func cachedValuesAreLibmsBitForBitOnFirstAndLaterCalls() throws {
        let fn = try Self.processSincos()
        for pass in 0..<3 {
            for x in Self.angles {
                let got = Self.cached(x, fn), want = Self.libm(x)
                #expect(got == want, "pass \(pass), x = \(x)")
            }
        }
        #expect(earshot_sincos_cache_count() > 0)
        #expect(earshot_sincos_cache_count() <= earshot_sincos_cache_capacity())
    }

    @Test func specialArgumentsBehaveAsLibms() throws {
        let fn = try Self.processSincos()
        for x in [0.0, -0.0, Double.leastNonzeroMagnitude, -Double.leastNormalMagnitude, 1e300, -1e22, Double.greatestFiniteMagnitude] {
            #expect(Self.cached(x, fn) == Self.libm(x), "x = \(x)")
            #expect(Self.cached(x, fn) == Self.libm(x), "x = \(x), again")
        }
        for x in [Double.infinity, -Double.infinity] {
            errno = 0
            var s = 0.0, c = 0.0
            fn(x, &s, &c)
            #expect(s.isNaN && c.isNaN, "x = \(x)")
            #expect(errno == EDOM, "x = \(x): libm reports a domain error")
        }
        var s = 0.0, c = 0.0
        fn(.nan, &s, &c)
        #expect(s.isNaN && c.isNaN)
    }

    @Test func concurrentCallersAllGetLibmsValues() throws {
        let fn = try Self.processSincos()
        // Fresh arguments, so the threads race to fill the same slots.
        let base = Double.random(in: 2000...3000)
        let values = (0..<400).map { base + Double($0) * 0.001 }
        let mismatches = Mutex(0)
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            var bad = 0
            for round in 0..<20 {
                for (index, x) in values.enumerated() where (index + worker + round) % 3 != 0 {
                    if Self.cached(x, fn) != Self.libm(x) { bad += 1 }
                }
            }
            mismatches.withLock { $0 += bad }
        }
        #expect(mismatches.withLock { $0 } == 0)
    }

    @Test func aFullTableStillAnswersLibmsValues() throws {
        let fn = try Self.processSincos()
        let capacity = Int(earshot_sincos_cache_capacity())
        let values = (0..<(capacity * 2)).map { 5000 + Double($0) * 0.37 }
        for x in values { _ = Self.cached(x, fn) }
        #expect(earshot_sincos_cache_count() <= earshot_sincos_cache_capacity())
        for x in values.reversed() {
            #expect(Self.cached(x, fn) == Self.libm(x), "x = \(x)")
        }
    }
}
