import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import IdentityService
import Testing
import GatehouseContracts

@testable import Gateway

@Suite struct ErrorTests {
    /// The contract's every code has a row in the one error table, and no row says 200.
    @Test func everyContractCodeIsInTheErrorTable() {
        for code in ErrorCode.all {
            #expect(ErrorTable.entries[code] != nil, "\(code) has no row in ErrorTable")
        }
        for (code, entry) in ErrorTable.entries {
            #expect(entry.status.code >= 400, "\(code)")
        }
    }

    /// Every service code reaches the client with its status, through the problem+json shape.
    @Test(arguments: [
        ("malformed_request", HTTPResponse.Status.badRequest, "malformed_request"),
        ("invalid_argument", .unprocessableContent, "invalid_argument"),
        ("invalid_email", .unprocessableContent, "invalid_email"),
        ("weak_password", .unprocessableContent, "weak_password"),
        ("email_exists", .conflict, "email_exists"),
        ("version_conflict", .conflict, "version_conflict"),
        ("invalid_credentials", .unauthorized, "invalid_credentials"),
        ("invalid_refresh_token", .unauthorized, "invalid_refresh_token"),
        ("refresh_token_reused", .unauthorized, "refresh_token_reused"),
        ("session_expired", .unauthorized, "session_expired"),
        ("session_revoked", .unauthorized, "session_revoked"),
        ("invalid_token", .unauthorized, "invalid_token"),
        ("token_expired", .unauthorized, "token_expired"),
        ("user_disabled", .forbidden, "user_disabled"),
        ("user_not_found", .notFound, "user_not_found"),
        ("migration_required", .conflict, "migration_required"),
        ("requires_recent_login", .forbidden, "requires_recent_login"),
        ("user_mismatch", .forbidden, "user_mismatch"),
        ("credential_already_in_use", .conflict, "credential_already_in_use"),
        ("provider_already_linked", .conflict, "provider_already_linked"),
        ("invalid_resume_handle", .badRequest, "invalid_resume_handle"),
        ("invalid_reset_code", .badRequest, "invalid_reset_code"),
        ("rate_limited", .tooManyRequests, "rate_limited"),
        ("overloaded", .serviceUnavailable, "overloaded"),
        ("unavailable", .serviceUnavailable, "service_unavailable"),
        ("deadline_exceeded", .serviceUnavailable, "service_unavailable"),
        ("internal", .internalServerError, "internal"),
        ("something_new", .internalServerError, "internal"),
    ])
    func serviceCodesMapToStatuses(code: String, status: HTTPResponse.Status, expected: String) async throws {
        try await Harness.run { h in
            h.services.fail(
                IdentityAPI.passwordStrength,
                with: RPCError(ErrorCode(rawValue: code), "service says \(code)", details: ["reasons": "too_short"]))
            let r = try await h.request(.post, "/v1/password-strength", json: #"{"password":"anything at all"}"#)
            let body = try r.expectProblem(status, expected)
            if status == .unauthorized {
                let challenge = r.headers[.wwwAuthenticate]
                #expect(challenge?.hasPrefix(#"Bearer realm="gatehouse""#) == true)
                #expect(challenge?.contains(#"error="invalid_token""#) == (code != "invalid_credentials"))
            }
            if code == "weak_password" { #expect(body["reasons"] as? [String] == ["too_short"]) }
            if status == .serviceUnavailable || status == .tooManyRequests { #expect(r.headers[.retryAfter] == "1") }
            if status == .internalServerError { #expect(body["detail"] as? String == "Internal error.") }
        }
    }

    @Test func signUpErrors() async throws {
        try await Harness.run { h in
            _ = try await h.signUp()
            try await h.request(.post, "/v1/accounts", json: #"{"email":"ada@example.com","password":"another password"}"#)
                .expectProblem(.conflict, "email_exists")
            let weak = try await h.request(.post, "/v1/accounts", json: #"{"email":"bob@example.com","password":"short"}"#)
            let body = try weak.expectProblem(.unprocessableContent, "weak_password")
            #expect(body["reasons"] as? [String] == ["too_short"])
            try await h.request(.post, "/v1/accounts", json: #"{"email":"not-an-email","password":"long enough pw"}"#)
                .expectProblem(.unprocessableContent, "invalid_email")
            let longEmail = String(repeating: "a", count: 250) + "@x.io"
            try await h.request(.post, "/v1/accounts", json: #"{"email":"\#(longEmail)","password":"long enough pw"}"#)
                .expectProblem(.unprocessableContent, "invalid_email")
            let longPassword = String(repeating: "p", count: 1025)
            try await h.request(.post, "/v1/accounts", json: #"{"email":"c@example.com","password":"\#(longPassword)"}"#)
                .expectProblem(.unprocessableContent, "invalid_argument")
            let longName = String(repeating: "n", count: 257)
            try await h.request(
                .post, "/v1/accounts", json: #"{"email":"c@example.com","password":"long enough pw","displayName":"\#(longName)"}"#
            ).expectProblem(.unprocessableContent, "invalid_argument")
        }
    }

    @Test func signInFailuresAreIdenticalForUnknownEmailAndWrongPassword() async throws {
        try await Harness.run { h in
            _ = try await h.signUp()
            let unknown = try await h.request(.post, "/v1/sessions", json: #"{"email":"nobody@example.com","password":"whatever pw"}"#)
            let wrong = try await h.request(.post, "/v1/sessions", json: #"{"email":"ada@example.com","password":"whatever pw"}"#)
            try unknown.expectProblem(.unauthorized, "invalid_credentials")
            #expect(unknown.status == wrong.status)
            #expect(unknown.text == wrong.text)
            var a = unknown.headers
            var b = wrong.headers
            a[.xRequestID] = nil
            b[.xRequestID] = nil
            a[.traceparent] = nil
            b[.traceparent] = nil
            #expect(a == b)
            #expect(unknown.headers[.wwwAuthenticate] == #"Bearer realm="gatehouse""#)
        }
    }

    @Test func disabledUserIsForbidden() async throws {
        try await Harness.run { h in
            let (user, _) = try await h.signUp()
            _ = try await h.services.identityHandlers.admin.setDisabled(SetDisabledRequest(userID: user["id"] as! String, disabled: true))
            try await h.request(.post, "/v1/sessions", json: #"{"email":"ada@example.com","password":"correct horse battery"}"#)
                .expectProblem(.forbidden, "user_disabled")
        }
    }

    @Test func malformedBodies() async throws {
        try await Harness.run { h in
            try await h.request(.post, "/v1/sessions", json: #"{"email":"a@b.c","#).expectProblem(.badRequest, "malformed_request")
            try await h.request(.post, "/v1/sessions", json: "[1,2]").expectProblem(.badRequest, "malformed_request")
            try await h.request(.post, "/v1/sessions", json: "").expectProblem(.badRequest, "malformed_request")
            let wrongType = try await h.request(.post, "/v1/sessions", json: #"{"email":42,"password":"x"}"#)
            let body = try wrongType.expectProblem(.badRequest, "malformed_request")
            #expect((body["detail"] as? String)?.contains("`email`") == true)
            let missing = try await h.request(.post, "/v1/sessions", json: #"{"email":"a@b.c"}"#)
            let missingBody = try missing.expectProblem(.badRequest, "malformed_request")
            #expect((missingBody["detail"] as? String)?.contains("`password`") == true)
            try await h.request(.post, "/v1/sessions", json: #"{"email":null,"password":"x"}"#).expectProblem(.badRequest, "malformed_request")
        }
    }

    @Test func settingsMustBeAnObject() async throws {
        try await Harness.run { h in
            let (_, session) = try await h.signUp()
            let token = session["accessToken"] as? String
            try await h.request(.patch, "/v1/me", json: #"{"settings":[1]}"#, token: token).expectProblem(.badRequest, "malformed_request")
            try await h.request(.patch, "/v1/me", json: #"{"settings":"x"}"#, token: token).expectProblem(.badRequest, "malformed_request")
        }
    }

    @Test func wrongContentType() async throws {
        try await Harness.run { h in
            try await h.request(.post, "/v1/sessions", json: #"{"email":"a@b.c","password":"x"}"#, contentType: "text/plain")
                .expectProblem(.unsupportedMediaType, "unsupported_media_type")
            try await h.request(.post, "/v1/sessions", json: #"{"email":"a@b.c","password":"x"}"#, contentType: nil)
                .expectProblem(.unsupportedMediaType, "unsupported_media_type")
            let ok = try await h.request(
                .post, "/v1/password-strength", json: #"{"password":"abcd"}"#, contentType: "Application/JSON; charset=utf-8")
            #expect(ok.status == .ok)
        }
    }

    @Test func bodyTooLarge() async throws {
        try await Harness.run(configure: { $0.maxBodySize = 1024 }) { h in
            let big = #"{"password":""# + String(repeating: "x", count: 2000) + #""}"#
            try await h.request(.post, "/v1/password-strength", json: big).expectProblem(.contentTooLarge, "payload_too_large")
        }
    }

    @Test func unknownRouteAndWrongMethod() async throws {
        try await Harness.run { h in
            try await h.request(.get, "/v1/nothing").expectProblem(.notFound, "not_found")
            let r = try await h.request(.put, "/v1/me")
            try r.expectProblem(.methodNotAllowed, "method_not_allowed")
            #expect(r.headers[.allow] == "DELETE, GET, PATCH")
            let s = try await h.request(.get, "/v1/sessions")
            try s.expectProblem(.methodNotAllowed, "method_not_allowed")
            #expect(s.headers[.allow] == "DELETE, POST")
        }
    }

    @Test func backendTimeoutIsServiceUnavailable() async throws {
        try await Harness.run(configure: { $0.requestTimeout = .milliseconds(100) }) { h in
            // The scenario is a service that does not answer in time.
            h.services.before(IdentityAPI.passwordStrength) { try await Task.sleep(for: .seconds(10)) }
            try await h.request(.post, "/v1/password-strength", json: #"{"password":"slow service"}"#)
                .expectProblem(.serviceUnavailable, "service_unavailable")
        }
    }
}
