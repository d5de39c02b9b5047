import EarshotWire
import Foundation
import Testing
import TestSupport

/// `/earshot/v1/` on the HTTP front (issue 12 item 3) with `curl --unix-socket` against real nginx
/// and minisign: asset status, install with progress as server-sent events, reservations — the
/// socket events' JSON, with the socket routes' privileges (a non-admin uid through `setpriv`;
/// TCP callers by key, never admins) and the documented error statuses.
@Suite struct EarshotHTTPRoutesTests {
    static let key = "es-routes-key-0123456789abcdef"

    struct Reply {
        var status: Int
        var body: String
        var json: [String: Any]? { (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] }
        var errorCode: String? { (json?["error"] as? [String: Any])?["code"] as? String }
        /// Server-sent events as (event, data) pairs.
        var events: [(event: String, data: [String: Any])] {
            body.components(separatedBy: "\n\n").compactMap { block in
                let lines = block.split(separator: "\n")
                guard let event = lines.first(where: { $0.hasPrefix("event: ") }), let data = lines.first(where: { $0.hasPrefix("data: ") }),
                      let object = try? JSONSerialization.jsonObject(with: Data(data.dropFirst(6).utf8)) as? [String: Any] else { return nil }
                return (String(event.dropFirst(7)), object)
            }
        }
    }

    /// `curl` on `target` (the HTTP socket, or a TCP base URL) as `uid` (nil: root).
    static func curl(_ daemon: TestDaemon, _ arguments: [String], path: String, tcp: UInt16? = nil, as uid: UInt32? = nil) async throws -> Reply {
        let target = tcp.map { ["http://127.0.0.1:\($0)\(path)"] } ?? ["--unix-socket", PrometheusScrape.socket(of: daemon), "http://earshot\(path)"]
        let curl = ["-sS", "-N", "-w", "\n%{http_code}"] + arguments + target
        let run = if let uid {
            try await OtherUser.run(as: uid, "/usr/bin/curl", curl, in: daemon.directory, timeout: .seconds(60))
        } else {
            try await ChildProcess.run("/usr/bin/curl", curl, in: daemon.directory, timeout: .seconds(60))
        }
        var lines = run.stdout.components(separatedBy: "\n")
        let status = Int(lines.removeLast()) ?? 0
        return Reply(status: status, body: lines.joined(separator: "\n"))
    }

    static let app = ["-H", "X-Earshot-App: org.example.curl"]
    static func json(_ body: String) -> [String] { ["-H", "Content-Type: application/json", "--data", body] }

    @Test func statusInstallWithProgressAndReservationsOverCurl() async throws {
        try await AssetFixture.with { fixture in
            let en = try await fixture.build(.random("asr-en", locales: ["en-US"], bytes: 256 << 10, seed: 80))
            let de = try await fixture.build(.random("asr-de", locales: ["de-DE"], bytes: 64 << 10, seed: 81))
            try await fixture.publishCatalog(version: 1, assets: [en, de], modified: Date(timeIntervalSinceNow: -3600))
            let port = try LoopbackPort.free()
            let keyFile = try fixture.directory.write("http-keys", "\(Self.key) org.example.tcp\n")
            let daemon = try await fixture.startDaemonWithCatalog("[HTTP]\nListen=127.0.0.1:\(port)\nKeyFile=\(keyFile)\n")
            fixture.openSocketDirectories(daemon)

            // Status: the socket's earshot.module-status.result.
            let supported = try await Self.curl(daemon, Self.app, path: "/earshot/v1/status?modules=transcriber:en-US,transcriber:de-DE")
            #expect(supported.status == 200 && supported.json?["status"] as? String == "supported", "\(supported)")
            #expect(supported.json?["modules"] as? [String] == ["supported", "supported"])
            // The fixture's catalog has no voice activity detector.
            let partly = try await Self.curl(daemon, Self.app, path: "/earshot/v1/status?modules=transcriber:en-US,detector")
            #expect(partly.json?["status"] as? String == "unsupported" && partly.json?["modules"] as? [String] == ["supported", "unsupported"], "\(partly)")

            // Install: progress events, then the result; the caller's app holds the reservation.
            let install = try await Self.curl(daemon, Self.app + Self.json(#"{"modules": [{"kind": "transcriber", "locale": "en-US"}]}"#), path: "/earshot/v1/install")
            #expect(install.status == 200, "\(install)")
            let events = install.events
            #expect(events.dropLast().allSatisfy { $0.event == InstallProgress.eventType } && events.count >= 2, "\(install.body)")
            #expect(events.contains { $0.data["phase"] as? String == "downloading" && $0.data["asset"] as? String == "asr-en" })
            let result = try #require(events.last)
            #expect(result.event == InstallReply.eventType)
            #expect(result.data["installed"] as? [String] == ["asr-en@1"] && result.data["reserved"] as? [String] == ["en-US"], "\(result.data)")
            let installed = try await Self.curl(daemon, Self.app, path: "/earshot/v1/status?modules=transcriber:en-US")
            #expect(installed.json?["status"] as? String == "installed")

            // Reservations: list, reserve, release; each app sees its own.
            let mine = try await Self.curl(daemon, Self.app, path: "/earshot/v1/reservations")
            let held = try #require(mine.json?["reservations"] as? [[String: Any]], "\(mine)")
            #expect(held.map { "\($0["app_id"] ?? "")/\($0["locale"] ?? "")" } == ["org.example.curl/en-US"])
            #expect(mine.json?["maximum"] as? Int == 3)
            let reserve = try await Self.curl(daemon, Self.app + Self.json(#"{"locale": "de-DE"}"#), path: "/earshot/v1/reservations")
            #expect(reserve.status == 200 && reserve.json?["created"] as? Bool == true, "\(reserve)")
            let again = try await Self.curl(daemon, Self.app + Self.json(#"{"locale": "de-DE"}"#), path: "/earshot/v1/reservations")
            #expect(again.json?["created"] as? Bool == false)
            let released = try await Self.curl(daemon, Self.app + ["-X", "DELETE"], path: "/earshot/v1/reservations/de-DE")
            #expect(released.status == 200 && released.json?["released"] as? Bool == true, "\(released)")

            // The socket routes' privileges: a non-admin uid sees its own, not everyone's.
            let own = try await Self.curl(daemon, [], path: "/earshot/v1/reservations", as: OtherUser.nobody)
            #expect(own.status == 200 && (own.json?["reservations"] as? [Any])?.isEmpty == true, "\(own)")
            let all = try await Self.curl(daemon, [], path: "/earshot/v1/reservations?all=true", as: OtherUser.nobody)
            #expect(all.status == 403 && all.errorCode == "permissionDenied", "\(all)")
            let others = try await Self.curl(daemon, ["-X", "DELETE"], path: "/earshot/v1/reservations/en-US?uid=0&app_id=org.example.curl", as: OtherUser.nobody)
            #expect(others.status == 403 && others.errorCode == "permissionDenied", "\(others)")
            let everyone = try await Self.curl(daemon, [], path: "/earshot/v1/reservations?all=true")
            #expect((everyone.json?["reservations"] as? [Any])?.count == 1, "root is an admin: \(everyone)")

            // Over TCP the key names the app, and a TCP caller is never an admin.
            let auth = ["-H", "Authorization: Bearer \(Self.key)"]
            let tcpReserve = try await Self.curl(daemon, auth + Self.json(#"{"locale": "en-US"}"#), path: "/earshot/v1/reservations", tcp: port)
            #expect(tcpReserve.status == 200 && tcpReserve.json?["created"] as? Bool == true, "\(tcpReserve)")
            let tcpList = try await Self.curl(daemon, auth, path: "/earshot/v1/reservations", tcp: port)
            #expect((tcpList.json?["reservations"] as? [[String: Any]])?.map { $0["app_id"] as? String } == ["org.example.tcp"], "\(tcpList)")
            #expect((tcpList.json?["reservations"] as? [[String: Any]])?.first?["uid"] as? Int == Int(OtherUser.nobody))
            let tcpAll = try await Self.curl(daemon, auth, path: "/earshot/v1/reservations?all=true", tcp: port)
            #expect(tcpAll.status == 403 && tcpAll.errorCode == "permissionDenied", "\(tcpAll)")
            #expect(try await Self.curl(daemon, [], path: "/earshot/v1/reservations", tcp: port).status == 401)

            // Bad input: the documented statuses, in OpenAI's error shape.
            let noModules = try await Self.curl(daemon, [], path: "/earshot/v1/status")
            #expect(noModules.status == 400 && noModules.errorCode == "badRequest", "\(noModules)")
            let badKind = try await Self.curl(daemon, [], path: "/earshot/v1/status?modules=speaker:en-US")
            #expect(badKind.status == 400 && badKind.body.contains("KIND[:LOCALE]"), "\(badKind)")
            let notJSON = try await Self.curl(daemon, ["--data", "modules=transcriber"], path: "/earshot/v1/install")
            #expect(notJSON.status == 400 && notJSON.errorCode == "badRequest", "\(notJSON)")
            let unsupported = try await Self.curl(daemon, Self.app + Self.json(#"{"modules": [{"kind": "transcriber", "locale": "fr-FR"}]}"#), path: "/earshot/v1/install")
            #expect(unsupported.status == 400 && unsupported.errorCode == "unsupportedLocale", "\(unsupported)")
            let badFlag = try await Self.curl(daemon, [], path: "/earshot/v1/reservations?all=yes")
            #expect(badFlag.status == 400, "\(badFlag)")
            let wrongMethod = try await Self.curl(daemon, [], path: "/earshot/v1/install")
            #expect(wrongMethod.status == 405, "\(wrongMethod)")

            // A failure after progress began ends the stream with an error event.
            var badDE = de
            badDE.sha256 = String(repeating: "d", count: 64)
            try await fixture.publishCatalog(version: 2, assets: [en, badDE], modified: Date(timeIntervalSinceNow: -1800))
            let refresh = try await ChildProcess.run(BuiltProducts.path("earshotctl"), ["--socket", daemon.socket, "catalog", "refresh"], in: daemon.directory)
            #expect(refresh.status == 0, "\(refresh.stderr)")
            let failing = try await Self.curl(daemon, Self.app + Self.json(#"{"modules": [{"kind": "transcriber", "locale": "de-DE"}]}"#), path: "/earshot/v1/install")
            #expect(failing.status == 200, "\(failing)")
            let last = try #require(failing.events.last, "\(failing.body)")
            #expect(failing.events.first?.event == InstallProgress.eventType)
            #expect(last.event == "error" && (last.data["error"] as? [String: Any])?["code"] as? String == "verificationFailed", "\(failing.body)")
            // Tried again: refused before any byte moves (the same bytes failed under this catalog).
            let retried = try await Self.curl(daemon, Self.app + Self.json(#"{"modules": [{"kind": "transcriber", "locale": "de-DE"}]}"#), path: "/earshot/v1/install")
            #expect(retried.events.map(\.event) == [InstallProgress.eventType, InstallProgress.eventType, "error"], "\(retried.body)")
            #expect(retried.events.map { $0.data["phase"] as? String } == ["queued", "failed", nil])
            #expect(retried.body.contains("not downloaded again"))
            // Where the failure is the response (OpenAI's route installs the model first), it is a 502.
            let openAI = try await Self.curl(daemon, Self.app + ["-F", "file=@\(SpeechFixtures.path(SpeechFixtures.ids[0]))", "-F", "model=asr-de"], path: "/v1/audio/transcriptions")
            #expect(openAI.status == 502 && openAI.errorCode == "verificationFailed", "\(openAI)")
        }
    }
}
