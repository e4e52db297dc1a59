import Foundation
import IdentityPorts
import GatehouseContracts
import GatehouseSupport
import GatehouseTestSupport
import IdentityCore
@testable import IdentityService
import RPCRouting
import Testing

/// The identity service's audit log (issue 22 §3) on a real SQLite store and PostgreSQL database: what each operation
/// records, that an event rides in its change's transaction (never without it, never twice), the
/// listing, and the prune.
@Suite("Identity: audit log")
struct AuditLogTests {
    let strong = "glacier lantern marmalade"
    let other = "saffron kettle obelisk"
    let client = ClientInfo(userAgent: "AuditTests/1.0", ip: "192.0.2.9")

    func events(_ h: Harness, user: String = "") async throws -> [AuditEvent] {
        try await h.caller.call(IdentityAPI.listAudit, ListAuditRequest(userID: user)).events
    }

    @Test("sign-up, failed sign-ins (wrong password, unknown address), a sign-in, a password change, claims, disable, enable and delete: one event each, in order, never a password", arguments: StoreKind.kept)
    func operationsAreRecorded(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let up = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "Audit@Example.com", password: strong, client: client))
        let id = up.user.id
        await expectCode(.invalidCredentials) {
            try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "audit@example.com", password: other, client: client))
        }
        await expectCode(.invalidCredentials) {
            try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "nobody@example.com", password: other, client: client))
        }
        let signedIn = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "audit@example.com", password: strong, client: client))
        let me = AuthenticatedCaller(userID: id, sessionID: signedIn.tokens.sessionID, authTime: h.clock.now)
        _ = try await h.caller.call(IdentityAPI.changePassword, ChangePasswordRequest(caller: me, password: other, client: client))
        _ = try await h.caller.call(IdentityAPI.setCustomClaims, SetCustomClaimsRequest(userID: id, claimsJSON: #"{"role":"admin"}"#))
        _ = try await h.caller.call(IdentityAPI.setDisabled, SetDisabledRequest(userID: id, disabled: true))
        await expectCode(.userDisabled) {
            try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "audit@example.com", password: other, client: client))
        }
        _ = try await h.caller.call(IdentityAPI.setDisabled, SetDisabledRequest(userID: id, disabled: false))
        _ = try await h.caller.call(IdentityAPI.deleteUser, UserIDRequest(userID: id))

        let log = try await events(h)
        #expect(log.map(\.kind) == [
            "sign_up", "sign_in.failed", "sign_in.failed", "sign_in", "password.changed", "claims.set", "user.disabled",
            "sign_in.failed", "user.enabled", "user.deleted",
        ])
        #expect(log.map(\.userID) == [id, id, "", id, id, id, id, id, id, id])
        #expect(log.map(\.reason) == ["", "invalid_credentials", "invalid_credentials", "", "", "", "", "user_disabled", "", ""])
        #expect(log.map(\.actor) == ["user", "user", "user", "user", "user", "operator", "operator", "user", "operator", "operator"])
        #expect(log[2].email == "nobody@example.com")
        #expect(log[4].sessionID == me.sessionID)
        for event in log where event.actor == "user" {
            #expect(event.ip == "192.0.2.9" && event.userAgent == "AuditTests/1.0", "\(event.kind)")
        }
        #expect(log.map(\.seq) == Array(1...10))
        #expect(log.allSatisfy { $0.occurredAt == h.clock.now.roundedToMilliseconds })
        // Neither password appears anywhere in the log.
        for event in log { #expect(!"\(event)".contains(strong) && !"\(event)".contains(other)) }
        #expect(try await events(h, user: id).count == 9)
    }

    @Test("the event is written in the change's transaction: not when the change fails, once when several writes follow, alone when nothing is written", arguments: StoreKind.kept)
    func sameTransaction(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let store = h.logStorage
        let up = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "tx@example.com", password: strong))
        let id = UserID(up.user.id)
        let before = try await events(h).count
        // A change that throws inside the transaction: no change, no event.
        let failing = AuditRecorder(AuditEvent(occurredAt: h.clock.now, kind: "test.failing", userID: id.rawValue))
        await #expect(throws: IdentityError.self) {
            try await AuditScope.$current.withValue(failing) {
                _ = try await store.update(id: id, expectedVersion: 99, now: h.clock.now) { $0.displayName = "never" }
            }
        }
        #expect(failing.isPending)
        #expect(try await events(h).count == before)
        #expect(try await store.user(id: id)?.displayName == nil)
        // Two writes in one scope: the event rides on the first, once.
        let twice = AuditRecorder(AuditEvent(occurredAt: h.clock.now, kind: "test.twice", userID: id.rawValue))
        try await AuditScope.$current.withValue(twice) {
            _ = try await store.update(id: id, expectedVersion: nil, now: h.clock.now) { $0.displayName = "one" }
            _ = try await store.update(id: id, expectedVersion: nil, now: h.clock.now) { $0.displayName = "two" }
        }
        #expect(!twice.isPending)
        #expect(try await events(h).filter { $0.kind == "test.twice" }.count == 1)
        // Enabling an enabled user writes nothing; the operator's action is still recorded.
        _ = try await h.caller.call(IdentityAPI.setDisabled, SetDisabledRequest(userID: id.rawValue, disabled: false))
        #expect(try await events(h).last?.kind == AuditEvent.Kind.userEnabled)
        // Deleting a user that does not exist deletes nothing, and records nothing.
        await expectCode(.userNotFound) {
            try await h.caller.call(IdentityAPI.adminDeleteUser, AdminUserRequest(userID: UserID.random().rawValue, actor: "admin_key:AAAAAAAAAAAAAAAA"))
        }
        #expect(try await events(h).last?.kind == AuditEvent.Kind.userEnabled)
        // A failure without a failure kind (a taken email at sign-up) records nothing.
        let count = try await events(h).count
        await expectCode(.emailExists) { try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "tx@example.com", password: strong)) }
        #expect(try await events(h).count == count)
    }

    @Test("listAudit: by user, after a position, since a time, a page; bad limits and user ids are invalid_argument", arguments: StoreKind.kept)
    func listing(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        var ids: [String] = []
        for n in 0..<3 {
            ids.append(try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "l\(n)@example.com", password: strong)).user.id)
            h.clock.advance(by: 10)
        }
        let all = try await events(h)
        #expect(all.map(\.userID) == ids)
        #expect(try await events(h, user: ids[1]).map(\.seq) == [2])
        let page = try await h.caller.call(IdentityAPI.listAudit, ListAuditRequest(afterSeq: 1, limit: 1))
        #expect(page.events.map(\.seq) == [2] && page.nextAfterSeq == 2)
        let since = try await h.caller.call(IdentityAPI.listAudit, ListAuditRequest(since: all[2].occurredAt))
        #expect(since.events.map(\.seq) == [3])
        #expect(try await h.caller.call(IdentityAPI.listAudit, ListAuditRequest(afterSeq: 3)) == ListAuditResponse(events: [], nextAfterSeq: 3))
        await expectCode(.invalidArgument) { try await h.caller.call(IdentityAPI.listAudit, ListAuditRequest(limit: 1001)) }
        await expectCode(.invalidArgument) { try await h.caller.call(IdentityAPI.listAudit, ListAuditRequest(userID: String(repeating: "x", count: 129))) }
    }

    @Test("the prune deletes events older than the retention and keeps the rest", arguments: StoreKind.kept)
    func retention(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let store = h.logStorage
        _ = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "old@example.com", password: strong))
        h.clock.advance(by: 3600)
        let kept = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "new@example.com", password: strong)).user.id
        h.clock.advance(by: 1800)
        let prune = ChangeLogPrune(store: store, clock: h.clock.wallClock, retention: 86_400, maxPerUser: 1000, auditRetention: 3600)
        try await prune.prune()
        #expect(try await events(h).map(\.userID) == [kept])
    }

    @Test("re-authentication, an email change and its confirmation, a migration and a self-deletion are recorded", arguments: StoreKind.kept)
    func accountFlows(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let up = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "flow@example.com", password: strong, client: client))
        let me = AuthenticatedCaller(userID: up.user.id, sessionID: up.tokens.sessionID, authTime: h.clock.now)
        await expectCode(.invalidCredentials) {
            try await h.caller.call(IdentityAPI.reauthenticate, ReauthenticateRequest(caller: me, password: other, client: client))
        }
        _ = try await h.caller.call(IdentityAPI.reauthenticate, ReauthenticateRequest(caller: me, password: strong, client: client))
        _ = try await h.caller.call(IdentityAPI.changeEmail, ChangeEmailRequest(caller: me, email: "flow2@example.com", client: client))
        // The anonymous user signs in to the existing account and agrees to the migration.
        let anonymous = try await h.caller.call(IdentityAPI.signInAnonymously, SignInAnonymouslyRequest(client: client))
        let anon = AuthenticatedCaller(userID: anonymous.user.id, sessionID: anonymous.tokens.sessionID, authTime: h.clock.now)
        _ = try await h.caller.call(
            IdentityAPI.signIn, SignInRequest(email: "flow@example.com", password: strong, client: client, caller: anon, allowMigration: true))
        _ = try await h.caller.call(IdentityAPI.deleteAccount, DeleteAccountRequest(caller: me, client: client))
        let log = try await events(h)
        #expect(log.map(\.kind) == [
            "sign_up", "reauthenticate.failed", "reauthenticate", "email_change.requested", "sign_up.anonymous", "migration", "sign_in",
            "account.deleted",
        ])
        #expect(log[3].email == "flow2@example.com")
        #expect(log[5].userID == up.user.id && log[5].detailJSON == #"{"anonymousUserId":"\#(anonymous.user.id)"}"#)
        #expect(log[4].userID == anonymous.user.id)
    }
}
