import Foundation
import GatehouseContracts
import GatehouseTestSupport
import IdentityCore
@testable import IdentityService
import RPCRouting
import Testing

/// What the review of the audit log and admin API found (issue 22), each pinned by a test.
@Suite("Identity: admin operations and audit edge cases")
struct AdminAuditReviewTests {
    let strong = "glacier lantern marmalade"

    func events(_ h: Harness, kind: String? = nil) async throws -> [AuditEvent] {
        let all = try await h.caller.call(IdentityAPI.listAudit, ListAuditRequest()).events
        return kind.map { kind in all.filter { $0.kind == kind } } ?? all
    }

    @Test("an operator's new address voids a reset code mailed before (it cannot undo the change); an empty change is invalid_argument")
    func adminEmailChangeVoidsCodes() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        let up = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "owner@example.com", password: strong))
        let link = try await h.caller.call(IdentityAPI.generateActionLink, GenerateActionLinkRequest(userID: up.user.id, kind: "password_reset"))
        _ = try await h.caller.call(IdentityAPI.adminUpdateUser, AdminUpdateUserRequest(userID: up.user.id, email: "new-owner@example.com"))
        await expectCode(.invalidResetCode) {
            try await h.caller.call(IdentityAPI.confirmPasswordReset, ConfirmPasswordResetRequest(code: link.code, password: "taken over passphrase"))
        }
        // A display name alone voids nothing: a fresh code keeps working.
        let fresh = try await h.caller.call(IdentityAPI.generateActionLink, GenerateActionLinkRequest(userID: up.user.id, kind: "password_reset"))
        _ = try await h.caller.call(IdentityAPI.adminUpdateUser, AdminUpdateUserRequest(userID: up.user.id, displayName: "Owner"))
        _ = try await h.caller.call(IdentityAPI.confirmPasswordReset, ConfirmPasswordResetRequest(code: fresh.code, password: "owner's own passphrase"))
        await expectCode(.invalidArgument) { try await h.caller.call(IdentityAPI.adminUpdateUser, AdminUpdateUserRequest(userID: up.user.id)) }
    }

    @Test("a malformed address is no event and is never stored; a well-formed one is stored normalized", arguments: StoreKind.kept)
    func typedEmailIsNotStored(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        await expectCode(.invalidEmail) {
            try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "my secret passphrase", password: "whatever it is"))
        }
        #expect(try await events(h).isEmpty)
        await expectCode(.invalidCredentials) {
            try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "Someone@EXAMPLE.com", password: "whatever it is"))
        }
        #expect(try await events(h).map(\.email) == ["someone@example.com"])
    }

    @Test("throttled refusals are sampled: the first is recorded, the next within a minute not, one again after it", arguments: StoreKind.kept)
    func throttledRefusalsAreSampled(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind, throttle: PasswordAttemptThrottle.Settings(threshold: 1, baseDelay: 600, maxDelay: 600))
        defer { h.cleanup() }
        _ = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "t@example.com", password: strong))
        for _ in 0..<6 {
            _ = try? await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "t@example.com", password: "wrong wrong wrong"))
        }
        let throttled = { try await events(h, kind: "sign_in.failed").filter { $0.reason == "too_many_attempts" } }
        #expect(try await throttled().count == 1)
        #expect(try await events(h, kind: "sign_in.failed").filter { $0.reason == "invalid_credentials" }.count == 1)
        h.clock.advance(by: 61)
        _ = try? await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "t@example.com", password: "wrong wrong wrong"))
        #expect(try await throttled().count == 2)
    }

    @Test("dates far outside what is stored are invalid_argument, never a crash (listAudit since, listUsers created range)")
    func farOffDates() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        let far = Date(timeIntervalSince1970: -8.6e16)
        await expectCode(.invalidArgument) { try await h.caller.call(IdentityAPI.listAudit, ListAuditRequest(since: far)) }
        await expectCode(.invalidArgument) { try await h.caller.call(IdentityAPI.listUsers, ListUsersRequest(createdAfter: far)) }
        await expectCode(.invalidArgument) {
            try await h.caller.call(IdentityAPI.listUsers, ListUsersRequest(createdBefore: Date(timeIntervalSince1970: 1e15)))
        }
        // A since after every event answers an empty page at once.
        _ = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "s@example.com", password: strong))
        let later = try await h.caller.call(IdentityAPI.listAudit, ListAuditRequest(since: h.clock.now.addingTimeInterval(60)))
        #expect(later.events.isEmpty && later.nextAfterSeq == 0)
        #expect(try await h.caller.call(IdentityAPI.listAudit, ListAuditRequest(since: h.clock.now.addingTimeInterval(-1))).events.count == 1)
    }

    @Test("listUsers: a full-width prefix finds the address it normalizes to; a verified address verified again is no new event")
    func prefixAndNoOps() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        let up = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "ana@example.com", password: strong))
        let found = try await h.caller.call(IdentityAPI.listUsers, ListUsersRequest(emailPrefix: "ＡＮＡ"))
        #expect(found.users.map(\.user.id) == [up.user.id])
        let first = try await h.caller.call(IdentityAPI.generateActionLink, GenerateActionLinkRequest(userID: up.user.id, kind: "verify_email"))
        _ = try await h.caller.call(IdentityAPI.confirmEmailVerification, EmailCodeRequest(code: first.code))
        #expect(try await events(h, kind: "email.verified").count == 1)
        await expectCode(.emailAlreadyVerified) {
            try await h.caller.call(IdentityAPI.generateActionLink, GenerateActionLinkRequest(userID: up.user.id, kind: "verify_email"))
        }
    }
}
