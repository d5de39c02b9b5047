@testable import Earshot
import EarshotSystem
import Glibc
import Testing

/// Which daemon uids a client trusts (``DaemonEndpoint/isTrusted(uid:environment:)``).
@Suite struct DaemonEndpointTests {
    /// Root's and this user's own daemon are trusted whatever the service user is set to; the
    /// check for them needs no NSS look-up (a name that does not exist changes nothing).
    @Test func ownAndRootDaemonsAreTrustedWithoutTheServiceUser() {
        let environment = ["EARSHOT_DAEMON_USER": "no-such-earshot-user-\(getpid())"]
        #expect(DaemonEndpoint.isTrusted(uid: getuid(), environment: environment))
        #expect(DaemonEndpoint.isTrusted(uid: 0, environment: environment))
    }

    /// The service user (`$EARSHOT_DAEMON_USER`, here as a uid) is trusted; any other uid is not.
    @Test func onlyTheConfiguredServiceUserIsTrustedBesides() {
        let own = Set([UInt32(0), getuid(), geteuid()])
        let service = (4000...4100).map(UInt32.init).first { !own.contains($0) }!
        let other = (service + 1...service + 100).first { !own.contains($0) }!
        let environment = ["EARSHOT_DAEMON_USER": "\(service)"]
        #expect(DaemonEndpoint.isTrusted(uid: service, environment: environment))
        #expect(!DaemonEndpoint.isTrusted(uid: other, environment: environment))
    }
}
