import EarshotWire
import Foundation

/// Listing shared by `earshot reservations` and `earshotctl reservations`.
public enum ReservationPrinter {
    public static func print(_ reply: ReservationsReply, json: Bool, showOwner: Bool) {
        if json {
            Output.json(reply)
            return
        }
        let rows = reply.reservations.map { r -> [String] in
            let used = Date(timeIntervalSince1970: r.lastUsed).formatted(.iso8601)
            return showOwner ? ["\(r.uid)", r.appId, r.locale, used] : [r.locale, used]
        }
        Output.table(showOwner ? ["UID", "APP", "LOCALE", "LAST USED"] : ["LOCALE", "LAST USED"], rows)
        Output.note("\(reply.reservations.count) reservation(s); this app may hold \(reply.maximum)")
    }
}
