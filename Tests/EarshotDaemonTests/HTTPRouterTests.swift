@testable import EarshotDaemon
import Foundation
import Testing

/// Issue 31: the HTTP front's one router — built once, a duplicate refused, one look-up a phase.
struct HTTPRouterTests {
    typealias Router = HTTPRouter<String>

    static func router() throws -> Router {
        try Router([
            .init(method: "GET", path: "/v1/models", access: .client, handle: "list"),
            .init(method: "GET", path: "/v1/models/*", access: .client, handle: "one"),
            .init(method: "GET", path: "/items", access: .client, handle: "items"),
            .init(method: "POST", path: "/items", access: .client, handle: "add"),
            .init(method: "DELETE", path: "/items/*", access: .client, handle: "remove"),
            .init(method: "GET", path: "/metrics", access: .scraper, handle: "scrape"),
        ])
    }

    @Test func aRouteIsFoundByMethodAndPathAndAPrefixNeedsARest() throws {
        let router = try Self.router()
        guard case .found(let list) = router.match("GET", "/v1/models"), case .found(let one) = router.match("GET", "/v1/models/base") else {
            Issue.record("routes not found")
            return
        }
        #expect(list.handle == "list" && one.handle == "one")
        guard case .found(let scrape) = router.match("GET", "/metrics") else {
            Issue.record("no /metrics")
            return
        }
        #expect(scrape.access == .scraper)
        guard case .notFound = router.match("DELETE", "/items/") else {
            Issue.record("an empty rest matched a prefix")
            return
        }
        guard case .notFound = router.match("GET", "/nothing") else {
            Issue.record("an unknown path matched")
            return
        }
        #expect(router.pattern(of: "/v1/models/tiny") == "/v1/models/*" && router.pattern(of: "/nothing") == "other")
    }

    @Test func aPathServedByOtherMethodsSaysWhichNot404() throws {
        guard case .wrongMethod(let allowed) = try Self.router().match("PUT", "/items") else {
            Issue.record("expected 405")
            return
        }
        #expect(allowed == ["GET", "POST"])
    }

    @Test func aDuplicateMethodAndPathIsRefusedWhenTheRouterIsBuilt() {
        #expect(throws: Router.DuplicateRoute.self) {
            try Router([.init(method: "GET", path: "/a/*", access: .client, handle: "1"), .init(method: "GET", path: "/a/*", access: .client, handle: "2")])
        }
        #expect(throws: Never.self) {
            try Router([.init(method: "GET", path: "/a", access: .client, handle: "1"), .init(method: "GET", path: "/a/*", access: .client, handle: "2")])
        }
    }

    /// The front's own table builds, and every route it serves is documented in Docs/HTTP.md.
    @Test func theFrontsRoutesBuildAndAreDocumented() throws {
        let router = try HTTPRouter(HTTPFront.routes)
        let docs = try String(contentsOfFile: #filePath.components(separatedBy: "/Tests/")[0] + "/Docs/HTTP.md", encoding: .utf8)
        for (method, path) in router.registered {
            let documented = path.hasSuffix("/*") ? "\(method) \(path.dropLast()){" : "\(method) \(path)"
            #expect(docs.contains(documented), "\(method) \(path) is not in Docs/HTTP.md")
        }
        #expect(router.registered.count == 10)
    }
}
