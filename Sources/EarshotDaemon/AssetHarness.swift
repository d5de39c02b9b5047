import EarshotAssets
import EarshotWire
import Foundation

/// The asset inventory's routes: decode, call ``AssetService`` (and its ``LanguageModelStore`` for
/// prepared custom language models), encode the reply.
struct AssetHarness: Sendable {
    let assets: AssetService

    var routes: [Route] {
        let (assets, languageModels) = (assets, assets.languageModels)
        return [
            .on(PrepareLanguageModelRequest.self) { request, call, context in
                let (prepared, reused) = try await languageModels.prepare(call.frame.payload, for: try Self.client(context), ignoresCache: request.ignoresCache,
                                                                                clientIdentifier: request.clientIdentifier)
                return [try Frame(PrepareLanguageModelReply(id: request.id, prepared: prepared, reused: reused))]
            },
            .on(LanguageModelsRequest.self, .admin("list every user's prepared language models", when: { request, _ in request.all })) { request, _, context in
                let models = try await languageModels.list(uid: request.all ? nil : context.peer.uid)
                return [try Frame(LanguageModelsReply(id: request.id, models: models, maximum: languageModels.maximumPerApp))]
            },
            .on(ModuleStatusRequest.self) { request, _, _ in
                let (status, each) = try await assets.status(of: request.modules)
                return [try Frame(ModuleStatusReply(id: request.id, status: status, modules: each))]
            },
            .on(LocalesRequest.self) { request, _, _ in
                let locales: [String]
                if let locale = request.equivalentTo {
                    locales = await assets.equivalentLocale(locale, kind: request.kind).map { [$0] } ?? []
                } else {
                    locales = try await assets.locales(kind: request.kind, installedOnly: request.installed)
                }
                return [try Frame(LocalesReply(id: request.id, locales: locales))]
            },
            .on(ReserveRequest.self) { request, _, context in
                let created = try await assets.reserve(request.locale, for: try Self.client(context))
                return [try Frame(ReserveReply(id: request.id, created: created))]
            },
            .on(ReleaseRequest.self, .admin("release another client's reservation", when: Self.namesAnotherClient)) { request, _, context in
                let me = try Self.client(context)
                let whose = ClientIdentity(uid: request.uid ?? me.uid, appID: request.appId ?? me.appID)
                return [try Frame(ReleaseReply(id: request.id, released: try await assets.release(request.locale, for: whose)))]
            },
            .on(ReservationsRequest.self, .admin("list every client's reservations", when: { request, _ in request.all })) { request, _, context in
                if request.all {
                    let quota = await assets.maximumReservedLocales(appID: context.appID ?? "")
                    return [try Frame(ReservationsReply(id: request.id, reservations: try await assets.reservations(of: nil), maximum: quota))]
                }
                let me = try Self.client(context)
                let list = try await assets.reservations(of: me)
                return [try Frame(ReservationsReply(id: request.id, reservations: list, maximum: await assets.maximumReservedLocales(appID: me.appID)))]
            },
            .on(InstallRequest.self, longRunning: true) { request, call, context in
                let id = request.id
                let outcome = try await assets.install(request.modules, for: try Self.client(context)) { event in
                    var event = event
                    event.id = id
                    if let frame = try? Frame(event) { call.progress(frame) }
                }
                return [try Frame(InstallReply(id: id, nothingToDo: outcome.nothingToDo, installed: outcome.installed, reserved: outcome.reserved))]
            },
            .on(InstallPlanRequest.self) { request, _, _ in
                let plan = try await assets.installPlan(request.modules)
                return [try Frame(InstallPlanReply(id: request.id, planned: plan.planned, availableBytes: plan.availableBytes))]
            },
            .on(AssetsRequest.self, .admin("list installed assets")) { request, _, _ in
                [try Frame(AssetsReply(id: request.id, assets: try await assets.installedAssetInfo(), jobs: await assets.jobInfo()))]
            },
            .on(CatalogRequest.self, .admin("refresh the catalog", when: { request, _ in request.refresh }), longRunning: true) { request, _, _ in
                let refreshed = request.refresh ? await assets.refreshCatalogs() : []
                let summary = await assets.catalogSummary()
                let installedAssets = try await assets.installedAssets()
                let installed = Set(installedAssets.map(\.key))
                let currentVersions = Dictionary(installedAssets.filter(\.current).map { ($0.entry.id, $0.entry.version) }, uniquingKeysWith: max)
                let holds = try await assets.holds()
                let sources = summary.sources.map { source in
                    let result = refreshed.first { $0.url == source.url }
                    return CatalogSourceInfo(url: source.url, version: source.version, keyId: source.keyID, outcome: result?.outcome.rawValue, message: result?.message)
                }
                let list = summary.assets.map {
                    CatalogAssetInfo(id: $0.id, version: $0.version, kind: $0.kind, engine: $0.engine, locales: $0.locales, size: $0.size, license: $0.license, installed: installed.contains("\($0.id)@\($0.version)"),
                                     installedVersion: currentVersions[$0.id], heldVersion: holds[$0.id]?.version)
                }
                return [try Frame(CatalogReply(id: request.id, sources: sources, assets: list))]
            },
            .on(CancelInstallRequest.self, .admin("cancel installs")) { request, _, _ in
                [try Frame(CancelInstallReply(id: request.id, cancelled: await assets.cancelInstall(request.asset)))]
            },
            .on(RollbackRequest.self, .admin("roll back assets")) { request, _, context in
                let (from, to) = try await assets.rollback(request.asset, requestedBy: Self.requester(context))
                return [try Frame(RollbackReply(id: request.id, asset: request.asset, fromVersion: from, toVersion: to))]
            },
            .on(HoldRequest.self, .admin("hold or unhold assets")) { request, _, context in
                if request.hold {
                    let (version, changed) = try await assets.hold(request.asset, requestedBy: Self.requester(context))
                    return [try Frame(HoldReply(id: request.id, asset: request.asset, version: version, held: true, changed: changed))]
                }
                let released = try await assets.unhold(request.asset, requestedBy: Self.requester(context))
                return [try Frame(HoldReply(id: request.id, asset: request.asset, version: released, held: false, changed: released != nil))]
            },
            .on(GCRequest.self, .admin("run garbage collection")) { request, _, _ in
                let report = try await assets.collectGarbage(dryRun: request.dryRun)
                return [try Frame(GCReply(id: request.id, dryRun: report.dryRun, removed: report.removed, freedBytes: report.freedBytes, expiredReservations: report.expiredReservations))]
            },
            .on(UpdateRequest.self, .admin("update assets"), longRunning: true) { request, _, context in
                let report = await assets.update(dryRun: request.dryRun, requestedBy: request.timer ? "timer" : Self.requester(context))
                let sources = report.catalogs.map { CatalogSourceInfo(url: $0.url, version: $0.version, keyId: nil, outcome: $0.outcome.rawValue, message: $0.message) }
                return [try Frame(UpdateReply(id: request.id, catalogs: sources, updated: report.updated, failed: report.failed, deferred: report.deferred,
                                              changed: report.changed, dryRun: report.dryRun, planned: report.planned, held: report.held))]
            },
            .on(PublishRequest.self, .admin("publish to a registry"), longRunning: true) { request, call, _ in
                let id = request.id
                var reply = try await assets.publish(to: try OCIReference.parse(request.target), source: request.catalog, assetIDs: request.assets,
                                                     dryRun: request.dryRun) { event in
                    var event = event
                    event.id = id
                    if let frame = try? Frame(event) { call.progress(frame) }
                }
                reply.id = id
                return [try Frame(reply)]
            },
        ]
    }

    /// Whether a release names a client other than the caller (uid or app id). Without a hello the
    /// caller has no identity yet: the handler refuses that with `badRequest`.
    private static func namesAnotherClient(_ request: ReleaseRequest, _ context: RequestContext) -> Bool {
        guard let appID = context.appID else { return false }
        return (request.uid ?? context.peer.uid) != context.peer.uid || (request.appId ?? appID) != appID
    }

    /// Who asked for a change, as the inventory's log names it.
    private static func requester(_ context: RequestContext) -> String { "uid \(context.peer.uid)" }

    /// The caller's identity for reservations: its uid and the app id from `earshot.hello`.
    static func client(_ context: RequestContext) throws -> ClientIdentity {
        guard let appID = context.appID else {
            throw WireError(.badRequest, "send earshot.hello with an app_id first: reservations belong to an app")
        }
        return ClientIdentity(uid: context.peer.uid, appID: appID)
    }
}
