import EarshotSystem
import EarshotWire
import Foundation
import Testing
import TestSupport

/// Quotas, own-versus-all visibility and admin-only operations over the wire. The non-admin peer is
/// a real second uid: a Python client run as 65534 (nobody) under `setpriv`.
@Suite struct AssetAccessTests {
    @Test func quotaIsEnforcedPerAppAndClientsSeeOnlyTheirOwnReservations() async throws {
        try await AssetFixture.with { fixture in
            let en = try await fixture.build(.random("asr-en", locales: ["en-US"], bytes: 128 << 10, seed: 40))
            let de = try await fixture.build(.random("asr-de", locales: ["de-DE"], bytes: 128 << 10, seed: 41))
            try await fixture.publishCatalog(version: 1, assets: [en, de])
            let daemon = try await fixture.startDaemonWithCatalog("[Assets]\nMaxReservedLocales=1")
            let a = try TestConnection(daemon.socket)
            let b = try TestConnection(daemon.socket)
            defer { a.close(); b.close() }
            try await a.hello("org.example.a")
            try await b.hello("org.example.b")

            let installed = try await a.call(InstallRequest(id: "i1", modules: [Modules.transcriber("en-US")])).decode(InstallReply.self)
            #expect(installed.reserved == ["en-US"])
            let second = try await a.call(ReserveRequest(id: "r1", locale: "de-DE"))
            #expect(second.errorCode == .quotaExceeded, "\(second)")
            let secondInstall = try await a.call(InstallRequest(id: "i2", modules: [Modules.transcriber("de-DE")]))
            #expect(secondInstall.errorCode == .quotaExceeded, "\(secondInstall)")
            #expect(try await a.call(ReserveRequest(id: "r2", locale: "en_US")).decode(ReserveReply.self).created == false)
            let unsupported = try await a.call(ReserveRequest(id: "r3", locale: "fr-FR"))
            #expect(unsupported.errorCode == .unsupportedLocale)

            let mine = try await a.call(ReservationsRequest(id: "l1")).decode(ReservationsReply.self)
            #expect(mine.maximum == 1)
            #expect(mine.reservations.map { "\($0.uid)/\($0.appId)/\($0.locale)" } == ["0/org.example.a/en-US"])

            // The quota is per (uid, app): app b of the same uid has its own, and sees only its own.
            #expect(try await b.call(ReservationsRequest(id: "l2")).decode(ReservationsReply.self).reservations.isEmpty)
            #expect(try await b.call(ReserveRequest(id: "r4", locale: "de-DE")).decode(ReserveReply.self).created)
            #expect(try await b.call(ReservationsRequest(id: "l3")).decode(ReservationsReply.self).reservations.map(\.locale) == ["de-DE"])

            // A second uid: its own reservations only, its own quota, and no `all`.
            let (welcome, replies) = try await fixture.runAsNobody(daemon, appID: "org.example.nobody", [
                try Frame(ReserveRequest(locale: "en-US")),
                try Frame(ReserveRequest(locale: "de-DE")),
                try Frame(ReservationsRequest()),
                try Frame(ReservationsRequest(all: true)),
            ])
            #expect(welcome.uid == 65534)
            #expect(!welcome.admin)
            #expect(try replies[0].decode(ReserveReply.self).created)
            #expect(replies[1].errorCode == .quotaExceeded, "\(replies[1])")
            let own = try replies[2].decode(ReservationsReply.self)
            #expect(own.reservations.map { "\($0.uid)/\($0.appId)/\($0.locale)" } == ["65534/org.example.nobody/en-US"])
            #expect(replies[3].errorCode == .permissionDenied, "\(replies[3])")

            // Root (an admin) sees everyone's.
            let everyone = try await a.call(ReservationsRequest(id: "all", all: true)).decode(ReservationsReply.self)
            #expect(everyone.reservations.map { "\($0.uid)/\($0.appId)/\($0.locale)" } == [
                "0/org.example.a/en-US", "0/org.example.b/de-DE", "65534/org.example.nobody/en-US",
            ])

            // Quota failures never started a download.
            let jobs = try await a.call(AssetsRequest(id: "assets")).decode(AssetsReply.self)
            #expect(jobs.jobs.isEmpty)
            #expect(jobs.assets.map(\.id) == ["asr-en"])
            #expect(fixture.server.accessLog().filter { $0.path == de.serverPath }.isEmpty)
        }
    }

    @Test func adminOperationsAreRefusedForOtherUsersAndAllowedForRoot() async throws {
        try await AssetFixture.with { fixture in
            let en = try await fixture.build(.random("asr-en", locales: ["en-US"], bytes: 128 << 10, seed: 50))
            try await fixture.publishCatalog(version: 1, assets: [en])
            let daemon = try await fixture.startDaemonWithCatalog()
            let root = try TestConnection(daemon.socket)
            defer { root.close() }
            let rootWelcome = try await root.hello("org.example.root")
            #expect(rootWelcome.admin && rootWelcome.uid == 0)
            #expect(try await root.call(ReserveRequest(id: "r", locale: "en-US")).decode(ReserveReply.self).created)

            let adminOnly: [(String, Frame)] = [
                ("assets", try Frame(AssetsRequest())),
                ("gc", try Frame(GCRequest())),
                ("gc dry run", try Frame(GCRequest(dryRun: true))),
                ("cancel", try Frame(CancelInstallRequest(asset: "asr-en"))),
                ("update", try Frame(UpdateRequest())),
                ("publish", try Frame(PublishRequest(target: "oci://127.0.0.1:1/earshot/catalog:v1", dryRun: true))),
                ("catalog refresh", try Frame(CatalogRequest(refresh: true))),
                ("reservations of all", try Frame(ReservationsRequest(all: true))),
                ("release another uid's reservation", try Frame(ReleaseRequest(locale: "en-US", uid: 0, appId: "org.example.root"))),
            ]
            let everyone: [Frame] = [
                try Frame(CatalogRequest(refresh: false)),
                try Frame(ReserveRequest(locale: "en-US")),
                try Frame(ReleaseRequest(locale: "en-US")),
                try Frame(ReserveRequest(locale: "en-US")),
            ]
            let (_, replies) = try await fixture.runAsNobody(daemon, appID: "org.example.nobody", adminOnly.map(\.1) + everyone)
            for ((name, _), reply) in zip(adminOnly, replies) {
                #expect(reply.errorCode == .permissionDenied, "\(name) by uid 65534: \(reply.type) \(reply.errorText ?? "")")
            }
            let rest = Array(replies.dropFirst(adminOnly.count))
            #expect(try rest[0].decode(CatalogReply.self).assets.map(\.id) == ["asr-en"])
            #expect(try rest[1].decode(ReserveReply.self).created)
            #expect(try rest[2].decode(ReleaseReply.self).released)
            #expect(try rest[3].decode(ReserveReply.self).created)

            // Root's reservation survived the refused release; nothing was cancelled or collected.
            #expect(try await root.call(ReservationsRequest(id: "mine")).decode(ReservationsReply.self).reservations.map(\.locale) == ["en-US"])

            // The same operations are allowed for root.
            let assets = try await root.call(AssetsRequest(id: "a"))
            #expect(assets.type == AssetsReply.eventType, "\(assets)")
            let gc = try await root.call(GCRequest(id: "gc", dryRun: true))
            #expect(gc.type == GCReply.eventType, "\(gc)")
            let gcRun = try await root.call(GCRequest(id: "gc2"))
            #expect(gcRun.type == GCReply.eventType, "\(gcRun)")
            let cancel = try await root.call(CancelInstallRequest(id: "c", asset: "asr-en"))
            #expect(try cancel.decode(CancelInstallReply.self).cancelled == false)
            let update = try await root.call(UpdateRequest(id: "u"))
            #expect(try update.decode(UpdateReply.self).changed == false)
            let refresh = try await root.call(CatalogRequest(id: "cat", refresh: true))
            #expect(try refresh.decode(CatalogReply.self).sources.map(\.outcome) == ["unchanged"])
            let all = try await root.call(ReservationsRequest(id: "all", all: true)).decode(ReservationsReply.self)
            #expect(all.reservations.map { "\($0.uid)/\($0.appId)" } == ["0/org.example.root", "65534/org.example.nobody"])
            let released = try await root.call(ReleaseRequest(id: "rel", locale: "en-US", uid: 65534, appId: "org.example.nobody"))
            #expect(try released.decode(ReleaseReply.self).released)
            let after = try await root.call(ReservationsRequest(id: "all2", all: true)).decode(ReservationsReply.self)
            #expect(after.reservations.map { "\($0.uid)/\($0.appId)" } == ["0/org.example.root"])
        }
    }
}
