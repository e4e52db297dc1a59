import Foundation
import IdentityPorts
import GatehouseContracts
import GatehouseTestSupport
import IdentityCore
import IdentityService
import Logging
import RPCRouting
import Synchronization
import Testing

/// Keeps every log line at every level.
final class RecordingLogHandler: LogHandler, @unchecked Sendable {
    private let lines = Mutex<[(Logger.Level, String)]>([])
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(event: LogEvent) { lines.withLock { $0.append((event.level, "\(event.message)")) } }
    var all: [(Logger.Level, String)] { lines.withLock { $0 } }
}

/// How many calls arrived.
final class CallCount: Sendable {
    let value = Mutex(0)
    func next() -> Int {
        value.withLock { count in
            count += 1
            return count
        }
    }
    var count: Int { value.withLock { $0 } }
}

/// The revocation after a password change (issue 19 part 2, F4): once the new password is
/// written, a failing revocation is retried, and never turns the answer into an error.
@Suite("Identity: the second revocation of a credential change")
struct RevocationRetryTests {
    /// SQLite and PostgreSQL.
    static let stores: [StoreKind] = StoreKind.kept
    let strong = "glacier lantern marmalade"
    let other = "saffron kettle obelisk"

    /// Handlers whose token service answers the first `revokeAllSessions` with `s-1`, then fails
    /// the next `failures` calls (unavailable), then answers `s-2`.
    func handlers(_ kind: StoreKind, failures: Int, log: RecordingLogHandler) async throws -> (LocalCaller, any UserStore, @Sendable () -> Void, CallCount) {
        let (store, cleanup) = try await kind.make()
        let calls = CallCount()
        var tokens = RPCRouter()
        tokens.register(ServiceContracts.issueSession) { request, _ in
            SessionTokens(accessToken: "at", refreshToken: "rt", expiresIn: 900, sessionID: "sid-\(request.userID)")
        }
        tokens.register(TokenAPI.revokeAllSessions) { _, _ in
            let call = calls.next()
            if call == 1 { return RevokedCount(count: 1, sessionIDs: ["s-1"]) }
            if call <= 1 + failures { throw RPCError(.unavailable, "the token service is down") }
            return RevokedCount(count: 1, sessionIDs: ["s-2"])
        }
        let handlers = IdentityHandlers(
            store: store, hasher: PasswordHasher(parameters: .testing, pool: HashPool(workers: 1, queueLimit: 8)), policy: PasswordPolicy(),
            tokens: LocalCaller(router: tokens), logger: Logger(label: "test") { _ in log })
        return (LocalCaller(router: handlers.router()), store, cleanup, calls)
    }

    func changePassword(_ caller: LocalCaller) async throws -> CredentialChangeResponse {
        let user = try await caller.call(IdentityAPI.signUp, SignUpRequest(email: "ada@example.com", password: strong)).user
        let me = AuthenticatedCaller(userID: user.id, sessionID: "mine", authTime: Date())
        return try await caller.call(IdentityAPI.changePassword, ChangePasswordRequest(caller: me, password: other))
    }

    @Test("a second revocation that keeps failing: the change is answered as done with what the first revoked, and an error is logged", arguments: Self.stores)
    func failingSecondRevocation(_ kind: StoreKind) async throws {
        let log = RecordingLogHandler()
        let (caller, _, cleanup, calls) = try await handlers(kind, failures: 100, log: log)
        defer { cleanup() }
        let reply = try await changePassword(caller)
        #expect(reply.revokedSessionIDs == ["s-1"])
        #expect(calls.count == 4, "the first revocation, then three tries of the second")
        _ = try await caller.call(IdentityAPI.signIn, SignInRequest(email: "ada@example.com", password: other))
        let errors = log.all.filter { $0.0 == .error }.map(\.1)
        #expect(errors.count == 1, "\(errors)")
        #expect(errors.first?.contains("password_changed") == true && errors.first?.contains("failed 3 times") == true, "\(errors)")
        #expect(!errors.joined().contains(other))
    }

    @Test("a second revocation that fails once is tried again: its sessions are in the answer, nothing is logged as an error", arguments: Self.stores)
    func retriedSecondRevocation(_ kind: StoreKind) async throws {
        let log = RecordingLogHandler()
        let (caller, _, cleanup, calls) = try await handlers(kind, failures: 1, log: log)
        defer { cleanup() }
        let reply = try await changePassword(caller)
        #expect(reply.revokedSessionIDs == ["s-1", "s-2"])
        #expect(calls.count == 3)
        #expect(!log.all.contains { $0.0 == .error })
    }
}
