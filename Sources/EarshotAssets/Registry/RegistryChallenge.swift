/// One `WWW-Authenticate` challenge: its scheme (`Bearer`, `Basic`) and parameters (`realm`,
/// `service`, `scope`), names lower-cased.
struct RegistryChallenge: Sendable, Hashable {
    var scheme: String
    var parameters: [String: String]

    /// Every challenge in the header values (RFC 9110 §11.6.1: a scheme, then comma-separated
    /// `name=value` or `name="quoted, value"` parameters; several challenges may share a value).
    static func parse(_ values: [String]) -> [RegistryChallenge] {
        var challenges: [RegistryChallenge] = []
        for value in values {
            var scanner = Substring(value)
            while true {
                scanner = scanner.drop { $0 == " " || $0 == "," }
                guard !scanner.isEmpty else { break }
                let scheme = scanner.prefix { $0 != " " && $0 != "," }
                scanner = scanner.dropFirst(scheme.count)
                var parameters: [String: String] = [:]
                while true {
                    let rest = scanner.drop { $0 == " " || $0 == "," }
                    // A parameter is `name=`; a bare token starts the next challenge.
                    let name = rest.prefix { $0 != "=" && $0 != " " && $0 != "," }
                    guard !name.isEmpty, rest.dropFirst(name.count).first == "=" else { break }
                    var after = rest.dropFirst(name.count + 1)
                    var parsed = ""
                    if after.first == "\"" {
                        after = after.dropFirst()
                        while let character = after.first, character != "\"" {
                            if character == "\\", let next = after.dropFirst().first {
                                parsed.append(next)
                                after = after.dropFirst(2)
                            } else {
                                parsed.append(character)
                                after = after.dropFirst()
                            }
                        }
                        after = after.dropFirst()
                    } else {
                        let token = after.prefix { $0 != "," && $0 != " " }
                        parsed = String(token)
                        after = after.dropFirst(token.count)
                    }
                    parameters[name.lowercased()] = parsed
                    scanner = after
                }
                challenges.append(RegistryChallenge(scheme: scheme.lowercased(), parameters: parameters))
            }
        }
        return challenges
    }
}
