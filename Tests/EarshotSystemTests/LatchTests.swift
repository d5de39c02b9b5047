import EarshotSystem
import Testing

/// Issue 31: what services and downloads wait on instead of polling a flag.
struct LatchTests {
    @Test func aLatchWakesEveryWaiterAndACancelledOne() async {
        let latch = Latch()
        let cancelled = Task { await latch.wait() }
        cancelled.cancel()
        await cancelled.value
        #expect(!latch.isOpen)
        async let first: Void = latch.wait()
        async let second: Void = latch.wait()
        latch.open()
        _ = await (first, second)
        await latch.wait() // already open: returns at once
        #expect(latch.isOpen)
    }
}
