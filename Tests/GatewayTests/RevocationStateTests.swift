import Foundation
import GatehouseContracts
import GatehouseTestSupport
import HTTPTypes
import HummingbirdTesting
import IdentityService
import JWTKit
import RPCRouting
import Testing
import TokenService

@testable import Gateway

/// The gateway's revocation state over the real token service in process: the snapshot at start,
/// gap and epoch detection, readiness, and the acknowledged revocations refused at once.
@Suite("Revocation state: snapshot, gaps, epochs, readiness")
struct RevocationStateTests {
    static let credentials = #"{"email":"ada@example.com","password":"correct horse battery"}"#

    func sid(_ token: String) async throws -> String {
        try await JWTKeyCollection().unverified(token, as: AccessTokenClaims.self).sid
    }

    /// Signs up (first call) and returns a new session's access token.
    func session(_ h: Harness, signUp: Bool = false) async throws -> String {
        if signUp { return try await h.signUp().session["accessToken"] as! String }
        let r = try await h.request(.post, "/v1/sessions", json: Self.credentials)
        #expect(r.status == .ok)
        return (try r.object()["session"] as! [String: Any])["accessToken"] as! String
    }

    /// Revokes `token`'s session in the token service with its event lost on the way.
    func revokeSilently(_ h: Harness, _ token: String) async throws {
        h.services.dropEvents(true)
        _ = try await h.services.token.revokeSession(RevokeSessionRequest(sessionID: try await sid(token)))
    }

    @Test("past the list's capacity an evicted revoked session is still refused (the token service is asked) and a live one served")
    func overflowAsksTheTokenService() async throws {
        try await Harness.run(configure: { $0.maxRevokedSessions = 2 }) { h in
            let first = try await session(h, signUp: true)
            let live = try await session(h)
            var revoked = [first]
            for _ in 0..<2 { revoked.append(try await session(h)) }
            for token in revoked { #expect(try await h.request(.delete, "/v1/sessions/current", token: token).status == .noContent) }
            // `first` no longer fits in the list; the token service still knows it is revoked.
            let before = h.services.calls(to: TokenAPI.verifyAccessToken)
            try await h.request(.get, "/v1/me", token: first).expectProblem(.unauthorized, "session_revoked")
            #expect(try await h.request(.get, "/v1/me", token: live).status == .ok)
            #expect(h.services.calls(to: TokenAPI.verifyAccessToken) >= before + 2)
        }
    }

    @Test("refresh-token reuse: the answering gateway refuses the session's access tokens at once, the event lost")
    func reuseIsRefusedAtOnce() async throws {
        try await Harness.run { h in
            let signUp = try await h.signUp()
            let refresh = signUp.session["refreshToken"] as! String
            let refreshed = try await h.request(.post, "/v1/sessions/refresh", json: #"{"refreshToken":"\#(refresh)"}"#)
            let access = (try refreshed.object()["session"] as! [String: Any])["accessToken"] as! String
            #expect(try await h.request(.get, "/v1/me", token: access).status == .ok)
            h.services.dropEvents(true)
            h.clock.advance(by: 11)
            try await h.request(.post, "/v1/sessions/refresh", json: #"{"refreshToken":"\#(refresh)"}"#)
                .expectProblem(.unauthorized, "refresh_token_reused")
            try await h.request(.get, "/v1/me", token: access).expectProblem(.unauthorized, "session_revoked")
        }
    }

    @Test("a (re)started gateway loads the revocations before it answers a bearer token")
    func restartedGatewayLoadsTheSnapshot() async throws {
        try await Harness.run { h in
            let revoked = try await session(h, signUp: true)
            let live = try await session(h)
            try await revokeSilently(h, revoked)
            try await Harness.run(reusing: h) { restarted in
                try await restarted.request(.get, "/v1/me", token: revoked).expectProblem(.unauthorized, "session_revoked")
                #expect(try await restarted.request(.get, "/v1/me", token: live).status == .ok)
            }
        }
    }

    @Test("until the state is loaded: /readyz 503, bearer requests 503 with Retry-After, other routes served")
    func notReadyUntilLoaded() async throws {
        try await Harness.run { h in
            let token = try await session(h, signUp: true)
            h.services.fail(TokenAPI.listRevocations, with: RPCError(.unavailable, "the token service is down"))
            try await Harness.run(reusing: h, configure: { $0.requestTimeout = .milliseconds(500) }) { g in
                #expect(try await g.request(.get, "/readyz").status == .serviceUnavailable)
                let refused = try await g.request(.get, "/v1/me", token: token)
                try refused.expectProblem(.serviceUnavailable, "service_unavailable")
                #expect(refused.headers[.retryAfter] == "1")
                try await g.request(.delete, "/v1/sessions/current", token: token).expectProblem(.serviceUnavailable, "service_unavailable")
                // No bearer token, no wait.
                #expect(try await g.request(.post, "/v1/sessions", json: Self.credentials).status == .ok)
                #expect(try await g.request(.get, "/.well-known/jwks.json").status == .ok)
                // A bad token is refused as such without waiting.
                try await g.request(.get, "/v1/me", token: "x.y.z").expectProblem(.unauthorized, "invalid_token")

                h.services.fail(TokenAPI.listRevocations, with: nil)
                try await waitUntil("/readyz 200") { try await g.request(.get, "/readyz").status == .ok }
                #expect(try await g.request(.get, "/v1/me", token: token).status == .ok)
            }
        }
    }

    @Test("a bearer request that arrives before the load waits for it")
    func requestsWaitForTheLoad() async throws {
        try await Harness.run { h in
            let token = try await session(h, signUp: true)
            let gate = Gate()
            h.services.before(TokenAPI.listRevocations) { await gate.wait() }
            try await Harness.run(reusing: h, configure: { $0.requestTimeout = .seconds(20) }) { g in
                try await gate.waitForWaiters(1)
                async let me = g.request(.get, "/v1/me", token: token)
                // Not answered while the load is held.
                #expect(try await g.request(.get, "/readyz").status == .serviceUnavailable)
                gate.open()
                #expect(try await me.status == .ok)
            }
        }
    }

    @Test("a seq gap shown by the heartbeat reloads the state; bearer requests wait for it")
    func gapIsDetectedByTheHeartbeat() async throws {
        try await Harness.run { h in
            let revoked = try await session(h, signUp: true)
            let live = try await session(h)
            #expect(try await h.request(.get, "/v1/me", token: revoked).status == .ok)
            #expect(h.parts.revocations.isCurrent)
            // The reload fails for now: the gateway must refuse (503), not let the token through.
            h.services.fail(TokenAPI.listRevocations, with: RPCError(.unavailable, "down"))
            try await revokeSilently(h, revoked)
            h.services.heartbeat()
            try await waitUntil("the gap noticed") { !h.parts.revocations.isCurrent }
            try await h.request(.get, "/v1/me", token: revoked).expectProblem(.serviceUnavailable, "service_unavailable")
            #expect(try await h.request(.get, "/readyz").status == .serviceUnavailable)

            try await waitUntil("a failed load counted") { h.parts.revocations.loadFailures > 0 }
            let metrics = try await h.request(.get, "/metrics").text
            #expect(metrics.contains("gatehouse_revocation_state_current 0"), "\(metrics)")
            #expect(metrics.contains("gatehouse_revocation_snapshot_load_failures "))

            h.services.fail(TokenAPI.listRevocations, with: nil)
            try await waitUntil("the state reloaded") { h.parts.revocations.isCurrent }
            let after = try await h.request(.get, "/metrics").text
            #expect(after.contains("gatehouse_revocation_state_current 1"), "\(after)")
            #expect(after.contains("gatehouse_revocation_listed_sessions 1"), "\(after)")
            try await h.request(.get, "/v1/me", token: revoked).expectProblem(.unauthorized, "session_revoked")
            #expect(try await h.request(.get, "/v1/me", token: live).status == .ok)
        }
    }

    @Test("a later event after a lost one shows the gap too")
    func gapIsDetectedByTheNextEvent() async throws {
        try await Harness.run { h in
            let revoked = try await session(h, signUp: true)
            #expect(try await h.request(.get, "/v1/me", token: revoked).status == .ok)
            let loads = h.services.calls(to: TokenAPI.listRevocations)
            try await revokeSilently(h, revoked)
            h.services.dropEvents(false)
            h.services.emitRevocation("some-other-session")
            try await waitUntil("reloaded") { h.services.calls(to: TokenAPI.listRevocations) > loads && h.parts.revocations.isCurrent }
            try await h.request(.get, "/v1/me", token: revoked).expectProblem(.unauthorized, "session_revoked")
        }
    }

    @Test("another epoch (a restarted token service) reloads the state")
    func epochChangeReloads() async throws {
        try await Harness.run { h in
            let revoked = try await session(h, signUp: true)
            #expect(try await h.request(.get, "/v1/me", token: revoked).status == .ok)
            try await revokeSilently(h, revoked)
            // The restarted service: a new epoch, nothing published in it yet.
            h.services.override(TokenAPI.listRevocations) { _ in
                var snapshot = try await h.services.token.listRevocations()
                (snapshot.epoch, snapshot.seq) = ("restarted", 0)
                return snapshot
            }
            h.services.emit(.heartbeat(RevocationHeartbeat(epoch: "restarted", seq: 0)))
            try await waitUntil("reloaded") { h.services.calls(to: TokenAPI.listRevocations) >= 2 && h.parts.revocations.isCurrent }
            try await h.request(.get, "/v1/me", token: revoked).expectProblem(.unauthorized, "session_revoked")
            // Its events now follow on from the snapshot: no further reload.
            let loads = h.services.calls(to: TokenAPI.listRevocations)
            h.services.emit(.revoked(SessionRevokedEvent(sessionID: "s-1", userID: "", reason: "test", revokedAt: Date(), epoch: "restarted", seq: 1)))
            h.services.emit(.heartbeat(RevocationHeartbeat(epoch: "restarted", seq: 1)))
            try await waitUntil("the event applied") { h.parts.revoked.contains("s-1", now: h.clock.now) }
            #expect(h.parts.revocations.isCurrent)
            #expect(h.services.calls(to: TokenAPI.listRevocations) == loads)
        }
    }

    @Test("the gateway that signs out refuses the revoked sessions before it answers, events lost or not")
    func acknowledgedRevocationsAreRefusedAtOnce() async throws {
        try await Harness.run { h in
            let first = try await session(h, signUp: true)
            let second = try await session(h)
            let third = try await session(h)
            h.services.dropEvents(true)
            #expect(try await h.request(.delete, "/v1/sessions/current", token: first).status == .noContent)
            try await h.request(.get, "/v1/me", token: first).expectProblem(.unauthorized, "session_revoked")
            #expect(try await h.request(.get, "/v1/me", token: second).status == .ok)
            #expect(try await h.request(.delete, "/v1/sessions", token: second).status == .noContent)
            for token in [second, third] {
                try await h.request(.get, "/v1/me", token: token).expectProblem(.unauthorized, "session_revoked")
            }
        }
    }

    @Test("disabling or deleting a user revokes its sessions durably: a restarted gateway refuses their tokens")
    func disableAndDeleteRevoke() async throws {
        try await Harness.run { h in
            let (user, session) = try await h.signUp()
            let disabledToken = session["accessToken"] as! String
            let (other, otherSession) = try await h.signUp("bob@example.com")
            let deletedToken = otherSession["accessToken"] as! String
            h.services.dropEvents(true)
            _ = try await h.services.identityHandlers.admin.setDisabled(SetDisabledRequest(userID: user["id"] as! String, disabled: true))
            _ = try await h.services.identityHandlers.admin.deleteUser(UserIDRequest(userID: other["id"] as! String))
            try await Harness.run(reusing: h) { restarted in
                for token in [disabledToken, deletedToken] {
                    try await restarted.request(.get, "/v1/me", token: token).expectProblem(.unauthorized, "session_revoked")
                }
            }
        }
    }

    @Test("a silent feed (cut off, or misconfigured) is polled every three heartbeat intervals")
    func silentFeedIsPolled() async throws {
        try await Harness.run(configure: { $0.revocationHeartbeat = .milliseconds(50) }) { h in
            let revoked = try await session(h, signUp: true)
            #expect(try await h.request(.get, "/v1/me", token: revoked).status == .ok)
            try await revokeSilently(h, revoked)
            try await waitUntil("polled") { try await h.request(.get, "/v1/me", token: revoked).status == .unauthorized }
            // Polling keeps the gateway serving.
            #expect(h.parts.revocations.isCurrent)
        }
    }

    @Test("revoked sessions stay listed for the token lifetime plus the leeway")
    func listKeepsEntriesPastExpiryPlusLeeway() async throws {
        try await Harness.run { h in
            let token = try await session(h, signUp: true)
            #expect(try await h.request(.delete, "/v1/sessions/current", token: token).status == .noContent)
            // The token is still accepted by `exp` for up to the leeway after 15 minutes.
            h.clock.advance(by: 900 + 5)
            #expect(h.parts.revoked.contains(try await sid(token), now: h.clock.now))
            try await h.request(.get, "/v1/me", token: token).expectProblem(.unauthorized, "session_revoked")
        }
    }
}
