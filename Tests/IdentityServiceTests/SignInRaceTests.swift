import Foundation
import GatehouseContracts
import GatehouseTestSupport
import IdentityCore
import RPCRouting
import Testing

@testable import IdentityService
import IdentityPorts

/// A sign-in that verified a password just before a change ended access (password change,
/// disable, deletion) must not come out with a live session: its session is revoked again and
/// the sign-in refused as if it had come after the change.
@Suite("Identity: sign-in racing a change that ends access")
struct SignInRaceTests {
    static let password = "correct horse battery"

    @Test("the password changes while the sign-in waits for its session: the session is revoked, invalid_credentials")
    func passwordChangedMeanwhile() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        let user = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "race@example.com", password: Self.password)).user
        let store = h.store
        h.tokens.onIssue { _ in
            _ = try? await store.update(id: UserID(user.id), expectedVersion: nil, now: Date()) { $0.passwordHash = "$argon2id$v=19$m=1024,t=1,p=1$bmV3$aGFzaA" }
        }
        await expectCode(.invalidCredentials) {
            try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "race@example.com", password: Self.password))
        }
        #expect(h.tokens.sessionRevocations == [RevokeSessionRequest(sessionID: "sid-1", reason: "credentials_changed")])
    }

    @Test("the user is disabled while the sign-in waits: revoked, user_disabled; deleted: revoked, invalid_credentials")
    func disabledOrDeletedMeanwhile() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        let a = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "dis@example.com", password: Self.password)).user
        let b = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "del@example.com", password: Self.password)).user
        let store = h.store
        h.tokens.onIssue { request in
            if request.userID == a.id { _ = try? await store.update(id: UserID(a.id), expectedVersion: nil, now: Date()) { $0.disabled = true } }
            if request.userID == b.id { try? await store.delete(id: UserID(b.id)) }
        }
        await expectCode(.userDisabled) {
            try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "dis@example.com", password: Self.password))
        }
        await expectCode(.invalidCredentials) {
            try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "del@example.com", password: Self.password))
        }
        #expect(h.tokens.sessionRevocations.count == 2)
        // Nothing raced: the sign-in keeps its session.
        h.tokens.onIssue(nil)
        _ = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "ok@example.com", password: Self.password))
        _ = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "ok@example.com", password: Self.password))
        #expect(h.tokens.sessionRevocations.count == 2)
    }
}
