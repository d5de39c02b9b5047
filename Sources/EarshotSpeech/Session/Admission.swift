import EarshotWire

/// At most `limit` sessions at once; sessions that ignore resource limits may go up to `hardLimit`.
struct Admission: Sendable {
    let limit: Int
    let hardLimit: Int

    /// Whether one more session may open when `open` are running.
    func admits(open: Int, ignoresResourceLimits: Bool) throws(SpeechError) {
        if open < limit { return }
        if ignoresResourceLimits, open < hardLimit { return }
        let cap = ignoresResourceLimits ? hardLimit : limit
        throw .admissionLimit(open: open, limit: cap)
    }
}
