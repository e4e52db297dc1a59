import Foundation
import GatehouseTestSupport
import ProviderTestSupport
import ProviderTokens
import Testing

/// Apple's server-to-server notifications: the four event types accepted, every forgery,
/// expiry and replay refused.
@Suite("Sign in with Apple: server-to-server notifications", .timeLimit(.minutes(1)))
struct AppleNotificationTests {
    @Test func theFourEventTypesAreAccepted() async throws {
        try await AppleHarness.run { h in
            let relay = "abc123@privaterelay.appleid.com"
            let cases: [(String, AppleNotification.EventType, String?, Any?, Bool?, Bool)] = [
                ("email-disabled", .emailDisabled, relay, "true", true, true),
                ("email-enabled", .emailEnabled, relay, true, true, false),
                ("consent-revoked", .consentRevoked, nil, nil, nil, true),
                ("account-delete", .accountDelete, nil, "false", false, false),
            ]
            for (name, type, email, flag, expected, asString) in cases {
                let body = h.notification(name, email: email, isPrivateEmail: flag, eventsAsString: asString)
                let event = try await h.notifications.verify(body: body)
                #expect(event.type == type)
                #expect(event.sub == "001234.abcdef")
                #expect(event.email == email)
                #expect(event.isPrivateEmail == expected, "\(name)")
                #expect(event.eventTime == h.clock.now)
                #expect(event.audience == AppleHarness.services)
                #expect(event.issuedAt == h.clock.now)
                #expect(event.jti != nil)
                h.clock.advance(by: 1)
            }
            #expect(AppleNotification.EventType.allCases.count == 4)
        }
    }

    @Test func anES256NotificationAndAnEventTimeAsTextAreAccepted() async throws {
        try await AppleHarness.run { h in
            let millis = Int(h.clock.now.timeIntervalSince1970 * 1000) - 5_000
            let events = #"{"type":"consent-revoked","sub":"001234.abcdef","event_time":"\#(millis)"}"#
            let event = try await h.notifications.verify(body: h.notification(claims: ["events": events], key: .ec1))
            #expect(event.eventTime == h.clock.now.addingTimeInterval(-5))
        }
    }

    @Test func aBadSignatureIsRefused() async throws {
        try await AppleHarness.run { h in
            #expect(await h.refusal(h.notification(key: .rogue))?.reason == .badSignature)
            // A good notification whose payload was changed after signing.
            let good = try #require(try JSONSerialization.jsonObject(with: h.notification()) as? [String: String])
            let parts = try #require(good["payload"]).split(separator: ".").map(String.init)
            let other = TestTokens.segment(["iss": "https://appleid.apple.com", "aud": AppleHarness.services, "iat": 1_800_000_000,
                                            "events": #"{"type":"account-delete","sub":"someone-else","event_time":1}"#])
            let tampered = try JSONSerialization.data(withJSONObject: ["payload": [parts[0], other, parts[2]].joined(separator: ".")])
            #expect(await h.refusal(tampered)?.reason == .badSignature)
            // alg none and HMAC never reach a key.
            let none = try JSONSerialization.data(withJSONObject: ["payload": TestTokens.unsigned(["iss": "x"], kid: "rsa-1")])
            #expect(await h.refusal(none)?.reason == .algorithmNotAllowed)
        }
    }

    @Test func aWrongAudienceIsRefused() async throws {
        try await AppleHarness.run { h in
            #expect(await h.refusal(h.notification(audience: "com.example.other"))?.reason == .wrongAudience)
        }
    }

    @Test func aWrongIssuerIsRefused() async throws {
        try await AppleHarness.run { h in
            #expect(await h.refusal(h.notification(claims: ["iss": "https://appleid.apple.com.evil.example"]))?.reason == .wrongIssuer)
            #expect(await h.refusal(h.notification(claims: ["iss": nil]))?.reason == .missingClaim)
        }
    }

    @Test func expiredAndFutureNotificationsAreRefused() async throws {
        try await AppleHarness.run { h in
            let now = Int(h.clock.now.timeIntervalSince1970)
            // With exp: past it beyond the 60 s skew.
            #expect(await h.refusal(h.notification(claims: ["iat": now - 700, "exp": now - 61]))?.reason == .expired)
            _ = try await h.notifications.verify(body: h.notification(claims: ["iat": now - 700, "exp": now - 30]))
            // Without exp: an hour after iat (and the skew).
            #expect(await h.refusal(h.notification(claims: ["iat": now - 3_600 - 61]))?.reason == .expired)
            _ = try await h.notifications.verify(body: h.notification(claims: ["iat": now - 3_600 + 30]))
            #expect(await h.refusal(h.notification(claims: ["iat": now + 120]))?.reason == .issuedInFuture)
            #expect(await h.refusal(h.notification(claims: ["iat": nil]))?.reason == .missingClaim)
            // A notification accepted now is expired once the clock passes its hour.
            let body = h.notification()
            h.clock.advance(by: 3_600 + 61)
            #expect(await h.refusal(body)?.reason == .expired)
        }
    }

    @Test func aReplayedNotificationIsRefused() async throws {
        try await AppleHarness.run { h in
            let body = h.notification("account-delete")
            _ = try await h.notifications.verify(body: body)
            let error = await h.refusal(body)
            #expect(error?.reason == .replayed)
            #expect(error?.code == "invalid_notification")
            // Another body with the same jti is the same notification.
            let jti = UUID().uuidString
            _ = try await h.notifications.verify(body: h.notification(claims: ["jti": jti]))
            #expect(await h.refusal(h.notification("email-enabled", claims: ["jti": jti]))?.reason == .replayed)
            // Without a jti: by the JWS's hash.
            let bare = h.notification(claims: ["jti": nil])
            let event = try await h.notifications.verify(body: bare)
            #expect(event.jti == nil)
            #expect(await h.refusal(bare)?.reason == .replayed)
        }
    }

    @Test func unknownTypesAndBadEventsAreRefused() async throws {
        try await AppleHarness.run { h in
            let error = await h.refusal(h.notification("email-transferred"))
            #expect(error == .unknownEventType("email-transferred"))
            #expect(error?.code == "unknown_event_type")
            for events: Any? in [nil, "not json", 42, #"{"sub":"001234.abcdef","event_time":1}"#] {
                let refusal = await h.refusal(h.notification(claims: ["events": events]))
                #expect(refusal?.code == "invalid_notification" && refusal?.reason == nil, "\(String(describing: events)): \(String(describing: refusal))")
            }
            for events in [#"{"type":"consent-revoked","event_time":1}"#, #"{"type":"consent-revoked","sub":"x"}"#] {
                if case .some(.invalidEvent) = await h.refusal(h.notification(claims: ["events": events])) {} else { Issue.record("\(events)") }
            }
        }
    }

    @Test func malformedBodiesAreRefusedWithoutAFetch() async throws {
        try await AppleHarness.run { h in
            let bodies = [
                Data(), Data("not json".utf8), Data(#"{"payload":42}"#.utf8), Data(#"{"signedPayload":"a.b.c"}"#.utf8),
                Data(#"{"payload":"a.b"}"#.utf8), Data(#"["a.b.c"]"#.utf8), Data(repeating: UInt8(ascii: " "), count: 20_000),
            ]
            for body in bodies {
                #expect(await h.refusal(body)?.reason == .malformed, "\(String(decoding: body.prefix(40), as: UTF8.self))")
            }
            #expect(h.fake.jwksFetches == 0)
        }
    }

    @Test func notificationsShareTheIDTokenVerifiersKeys() async throws {
        try await AppleHarness.run { h in
            h.fake.apple.register(code: "code-1", clientID: AppleHarness.services)
            let response = try await h.client.exchange(code: "code-1", clientID: AppleHarness.services)
            _ = try await h.idTokens.verify(idToken: response.idToken, provider: "apple", nonce: nil)
            _ = try await h.notifications.verify(body: h.notification())
            #expect(h.fake.jwksFetches == 1, "one JWKS fetch for both")
        }
    }

    @Test func anUnreachableKeySetIsProviderUnavailable() async throws {
        try await AppleHarness.run(configure: { $0.set(mode: .down) }) { h in
            let error = await h.refusal(h.notification())
            #expect(error?.code == "provider_unavailable")
        }
    }
}
