/// A template string parsed into literal text and `<class>` references, which counts its
/// expansions (the product of its classes' sizes, overflow-checked) before producing any.
public struct TemplateExpansion: Sendable, Hashable {
    enum Part: Sendable, Hashable {
        case text(String)
        case reference(String)
    }

    let body: String
    let parts: [Part]

    /// Parses `body`; an unclosed or empty `<…>` is an error.
    public init(_ body: String) throws(CustomLanguageModelError) {
        self.body = body
        var parts: [Part] = []
        var rest = Substring(body)
        while let open = rest.firstIndex(of: "<") {
            if open > rest.startIndex { parts.append(.text(String(rest[..<open]))) }
            let afterOpen = rest.index(after: open)
            guard let close = rest[afterOpen...].firstIndex(of: ">") else { throw .invalid("template \"\(body)\"", "has a \"<\" with no \">\"") }
            let name = String(rest[afterOpen..<close])
            guard !name.isEmpty, !name.contains("<") else { throw .invalid("template \"\(body)\"", "has an empty or nested class reference") }
            parts.append(.reference(name))
            rest = rest[rest.index(after: close)...]
        }
        if !rest.isEmpty { parts.append(.text(String(rest))) }
        guard !parts.contains(where: { if case .text(let text) = $0 { text.contains(">") } else { false } }) else {
            throw .invalid("template \"\(body)\"", "has a \">\" with no \"<\"")
        }
        self.parts = parts
    }

    /// How many phrases the template expands to over `classes`; more than `limit` is an error
    /// (reported against `total`, the file's bound), as is a class `classes` does not define.
    public func expansions(classes: [String: [String]], limit: Int, total: Int? = nil) throws(CustomLanguageModelError) -> Int {
        var product = 1
        for case .reference(let name) in parts {
            guard let members = classes[name] else { throw .undefinedClass(template: body, className: name) }
            let (value, overflow) = product.multipliedReportingOverflow(by: members.count)
            guard !overflow, value <= limit else { throw .limitExceeded("phrases the templates expand to", limit: total ?? limit) }
            product = value
        }
        guard product <= limit else { throw .limitExceeded("phrases the templates expand to", limit: total ?? limit) }
        return product
    }

    /// The length of the template's longest expansion, in characters.
    public func longestExpansion(classes: [String: [String]]) -> Int {
        parts.reduce(0) { length, part in
            switch part {
            case .text(let text): length + text.count
            case .reference(let name): length + (classes[name]?.map(\.count).max() ?? 0)
            }
        }
    }

    /// Calls `body` with each expansion in order (the first class varies slowest) until it
    /// returns false. Count them with ``expansions(classes:limit:total:)`` first.
    public func forEachExpansion(classes: [String: [String]], _ body: (String) -> Bool) {
        let lists: [[String]] = parts.map { part in
            switch part {
            case .text(let text): [text]
            case .reference(let name): classes[name] ?? []
            }
        }
        guard !lists.contains(where: \.isEmpty) else { return }
        var indices = [Int](repeating: 0, count: lists.count)
        while true {
            guard body(zip(lists, indices).map { $0[$1] }.joined()) else { return }
            var position = lists.count - 1
            while position >= 0 {
                indices[position] += 1
                if indices[position] < lists[position].count { break }
                indices[position] = 0
                position -= 1
            }
            if position < 0 { return }
        }
    }
}
