import EarshotWire

/// At most `limit` sessions at once; sessions that ignore resource limits may go up to `hardLimit`.
struct Admission: Sendable {
    let limit: Int
    let hardLimit: Int

    /// Whether one more session may open when `open` are running.
    func admits(open: Int, ignoresResourceLimits: Bool) throws(WireError) {
        if open < limit { return }
        if ignoresResourceLimits, open < hardLimit { return }
        let cap = ignoresResourceLimits ? hardLimit : limit
        throw WireError(.insufficientResources, "too many analyses at once (\(open) running, limit \(cap)); retry when one finishes")
    }
}
