import Foundation
import GatehouseContracts
import GatehouseTestSupport
import Testing
import TokenCore
@testable import TokenService
import TokenPorts

/// Rotating the signing keys on request, audited with who asked, and on a schedule
/// (`keyRotationInterval`, `GATEHOUSE_SIGNING_KEY_ROTATION_DAYS`: issue 35 §5), on both stores.
@Suite("Token service: signing key rotation, audited and scheduled")
struct SigningKeyRotationTests {
    static let day: TimeInterval = 86_400

    /// The token service's audit events of kind `signing_key.rotated`, oldest first.
    func rotations(_ h: Harness) async throws -> [AuditEvent] {
        try await h.service.store.auditEvents(ListAuditRequest()).events.filter { $0.kind == AuditEvent.Kind.signingKeyRotated }
    }

    @Test("token.rotateKeys with an admin key as actor: the reply names the new key, its activation and the published keys; audited with the actor; a bad actor is refused", arguments: TokenStoreKind.allCases)
    func rotationAudited(kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        let first = h.service.keys.activeKid
        let rotated = try await h.service.rotateKeys(RotateKeysRequest(actor: "admin_key:AbCd-_1234567890"))
        #expect(rotated.kid != first && rotated.previousKid == first)
        #expect(rotated.activatesAt == h.clock.now && h.service.keys.activeKid == rotated.kid)
        #expect(rotated.previousRetiresAt == h.clock.now.addingTimeInterval(900 + 10))  // the token lifetime plus the 10 s leeway
        #expect(rotated.publishedKids == [first, rotated.kid].sorted())
        let events = try await rotations(h)
        #expect(events.count == 1)
        #expect(events.first?.actor == "admin_key:AbCd-_1234567890" && events.first?.reason == "")
        #expect(events.first?.detailJSON.contains(#""kid":"\#(rotated.kid)""#) == true)
        #expect(events.first?.detailJSON.contains(#""previousKid":"\#(first)""#) == true)
        // An empty request is the operator's (callers of the former Empty request).
        _ = try await h.service.rotateKeys(RotateKeysRequest())
        #expect(try await rotations(h).last?.actor == AuditEvent.Actor.operator)
        for bad in ["user", "system", "admin_key:", "admin_key:has space", "admin_key:" + String(repeating: "a", count: 65)] {
            await #expect(throws: TokenError.self, "actor \(bad)") { try await h.service.rotateKeys(RotateKeysRequest(actor: bad)) }
        }
        #expect(try await rotations(h).count == 2)
    }

    @Test("the schedule: no new key until the newest is older than the interval, then one, audited as the system's; the old key leaves the JWKS after its last token expired", arguments: TokenStoreKind.allCases)
    func scheduled(kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind) { $0.keyRotationInterval = 2 * Self.day }
        let first = h.service.keys.activeKid
        #expect(try await h.service.rotateKeysIfDue() == nil)
        h.clock.advance(by: 2 * Self.day)
        #expect(try await h.service.rotateKeysIfDue() == nil)
        h.clock.advance(by: 1)
        let rotated = try #require(try await h.service.rotateKeysIfDue())
        #expect(rotated.previousKid == first && h.service.keys.activeKid == rotated.kid)
        #expect(try await h.service.rotateKeysIfDue() == nil)
        let events = try await rotations(h)
        #expect(events.count == 1 && events.first?.actor == AuditEvent.Actor.system && events.first?.reason == "scheduled")
        #expect(h.service.keys.jwksJSON(at: h.clock.now).contains(first))
        h.clock.advance(by: 900 + 10)
        #expect(!h.service.keys.jwksJSON(at: h.clock.now).contains(first))
        #expect(h.service.keys.jwksJSON(at: h.clock.now).contains(rotated.kid))
        // Off: never.
        let off = try await Harness.make(kind)
        off.clock.advance(by: 3650 * Self.day)
        #expect(try await off.service.rotateKeysIfDue() == nil)
    }

    @Test("two instances on one store whose schedules fall due together make one new key per due time, and both sign with it", arguments: TokenStoreKind.allCases)
    func oneRotationPerDueTime(kind: TokenStoreKind) async throws {
        let configure: (inout TokenConfiguration) -> Void = { $0.keyRotationInterval = Self.day }
        let a = try await Harness.make(kind, configure: configure)
        let b = try await Harness.make(kind, dir: a.dir, database: a.database, clock: a.clock, identity: a.identity, configure: configure)
        for round in 1...5 {
            a.clock.advance(by: Self.day + 1)
            async let fromA = a.service.rotateKeysIfDue()
            async let fromB = b.service.rotateKeysIfDue()
            let made = try await [fromA, fromB].compactMap { $0 }
            #expect(made.count == 1, "round \(round): \(made.count) rotations")
            let keys = try await a.service.store.keys()
            #expect(keys.count == round + 1)
            #expect(keys.filter { $0.signingUntil == nil }.count == 1)
            // The instance that did not rotate loaded the other's key.
            #expect(a.service.keys.activeKid == b.service.keys.activeKid && a.service.keys.activeKid == made.first?.kid)
        }
        #expect(try await rotations(a).count == 5)
    }
}
