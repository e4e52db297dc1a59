import Foundation
import GatehouseContracts
import Synchronization
import TokenCore
@testable import TokenService
import RPCRouting

/// A clock tests move by hand.
final class TestClock: Sendable {
    private let current = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
    var now: Date { current.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

/// A stand-in identity service answering `identity.claimsForSession`.
final class FakeIdentity: Sendable {
    let claims = Mutex<[String: UserClaims]>([:])
    let calls = Atomic<Int>(0)
    /// The deadline each call was served with.
    let deadlines = Mutex<[ContinuousClock.Instant]>([])

    var router: RPCRouter {
        var router = RPCRouter()
        router.register(ServiceContracts.claimsForSession) { request, context in
            self.calls.add(1, ordering: .relaxed)
            self.deadlines.withLock { $0.append(context.deadline) }
            return self.claims.withLock { $0[request.userID] } ?? UserClaims(exists: false)
        }
        return router
    }
}

/// Records published events.
final class EventLog: Sendable {
    let events = Mutex<[(String, [UInt8])]>([])
    func publish(_ topic: String, _ payload: [UInt8]) { events.withLock { $0.append((topic, payload)) } }
    var topics: [String] { events.withLock { $0.map(\.0) } }
}

struct Harness {
    let service: TokenService
    let clock: TestClock
    let identity: FakeIdentity
    let events: EventLog
    let dir: URL

    static func make(
        algorithm: SigningAlgorithm = .es256, encryptionKey: [UInt8]? = nil, dir: URL? = nil, clock: TestClock = TestClock()
    ) async throws -> Harness {
        let dir = dir ?? FileManager.default.temporaryDirectory.appendingPathComponent("token-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        var config = TokenConfiguration(databasePath: dir.appendingPathComponent("token.sqlite").path, issuer: "https://auth.test", audience: "app")
        config.algorithm = algorithm
        if let encryptionKey { config.encryptionKey = .init(data: encryptionKey) }
        let identity = FakeIdentity()
        let events = EventLog()
        let service = try await TokenService.start(
            configuration: config, identity: LocalCaller(router: identity.router), publish: events.publish, now: { clock.now })
        return Harness(service: service, clock: clock, identity: identity, events: events, dir: dir)
    }

    func issue(user: String = "user-1", email: String = "a@example.com") async throws -> SessionTokens {
        identity.claims.withLock { $0[user] = UserClaims(email: email, emailVerified: true) }
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
