import Foundation
import GatehouseContracts
import GatehouseTestSupport
import TokenCore
@testable import TokenService
import RPCRouting

/// A token service on a fresh SQLite file, with a manual clock, a fake identity service and a
/// recording event sink.
struct Harness {
    let service: TokenService
    let clock: ManualClock
    let identity: FakeIdentityService
    let events: RecordingEventSink
    let dir: URL

    static func make(
        algorithm: SigningAlgorithm = .es256, encryptionKey: [UInt8]? = nil, dir: URL? = nil, clock: ManualClock = ManualClock()
    ) async throws -> Harness {
        let dir = try dir ?? TemporaryDirectory(prefix: "token-tests").url
        var config = TokenConfiguration(databasePath: dir.appendingPathComponent("token.sqlite").path, issuer: "https://auth.test", audience: "app")
        config.algorithm = algorithm
        if let encryptionKey { config.encryptionKey = .init(data: encryptionKey) }
        let identity = FakeIdentityService()
        let events = RecordingEventSink()
        let service = try await TokenService.start(
            configuration: config, identity: identity.caller, publish: events.record, clock: clock.wallClock)
        return Harness(service: service, clock: clock, identity: identity, events: events, dir: dir)
    }

    func issue(user: String = "user-1", email: String = "a@example.com") async throws -> SessionTokens {
        identity.set(user, UserClaims(email: email, emailVerified: true))
        return try await service.issueSession(IssueSessionRequest(
            userID: user, claims: UserClaims(email: email, emailVerified: true), amr: ["pwd"], authTime: clock.now,
            client: ClientInfo(userAgent: "tests", ip: "127.0.0.1")))
    }
}

/// Asserts `body` fails with the wire code `code`.
func expectCode<T>(_ code: ErrorCode, _ body: () async throws -> T) async -> Bool {
    do {
        _ = try await body()
        return false
    } catch let error as TokenError {
        return error.code == code
    } catch let error as RPCError {
        return error.code == code
    } catch {
        return false
    }
}
