import EarshotWire
import Foundation

/// Listing of prepared custom language models, shared by `earshot lm list` and `earshotctl language-models`.
public enum LanguageModelPrinter {
    public static func print(_ reply: LanguageModelsReply, json: Bool, showOwner: Bool) {
        if json {
            Output.json(reply)
            return
        }
        let rows = reply.models.map { m -> [String] in
            let mine = [m.appId, m.identifier, m.version, m.locale, "\(m.phrases)", "\(m.words)", Date(timeIntervalSince1970: m.prepared).formatted(.iso8601), m.model]
            return showOwner ? ["\(m.uid)"] + mine : mine
        }
        let headers = ["APP", "IDENTIFIER", "VERSION", "LOCALE", "PHRASES", "WORDS", "PREPARED", "MODEL"]
        Output.table(showOwner ? ["UID"] + headers : headers, rows)
        Output.note("\(reply.models.count) prepared custom language model(s); one app may keep \(reply.maximum)")
    }
}
