import Foundation
import TokenPorts
@testable import SQLiteStores
import GatehouseContracts
import GatehouseSupport
import GatehouseTestSupport
import Testing
import TokenCore
@testable import TokenService

/// A rotated key published before it signs (`keyActivationDelay`, several instances: issue 24).
@Suite struct KeyActivationTests {
    @Test("with an activation delay a rotated key is published at once and signs only from its activation")
    func publishedBeforeSigning() async throws {
        let h = try await Harness.make()
        let oldKid = h.service.keys.activeKid
        let service = try await TokenService.start(
            configuration: {
                var c = h.service.configuration
                c.keyActivationDelay = 21
                c.keySyncInterval = 10
                return c
            }(), store: SQLiteTokenStore(path: h.databasePath), identity: h.identity.caller, clock: h.clock.wallClock)
        #expect(service.keys.activeKid == oldKid)
        let rotated = try await service.rotateKeys()
        #expect(rotated.previousKid == oldKid && rotated.kid != oldKid)
        // The old key stays published until its last token, signed up to the activation, expires.
        #expect(rotated.previousRetiresAt == h.clock.now.addingTimeInterval(21 + 900 + 10))
        #expect(service.nextKeyActivation == h.clock.now.addingTimeInterval(21))
        #expect(service.keys.activeKid == oldKid)
        #expect(service.keys.jwksJSON(at: h.clock.now).contains(rotated.kid))
        // The other instance (the harness's service on the same file) publishes it at its next load.
        #expect(!h.service.keys.jwksJSON(at: h.clock.now).contains(rotated.kid))
        #expect(try await h.service.reloadKeys() == h.clock.now.addingTimeInterval(21))
        #expect(h.service.keys.jwksJSON(at: h.clock.now).contains(rotated.kid) && h.service.keys.activeKid == oldKid)
        let before = try await h.issue().accessToken
        #expect(Self.kid(before) == oldKid)
        // From its activation both sign with it, and tokens signed before still verify.
        h.clock.advance(by: 21)
        #expect(try await h.service.reloadKeys() == nil)
        #expect(try await service.reloadKeys() == nil)
        #expect(h.service.keys.activeKid == rotated.kid && service.keys.activeKid == rotated.kid)
        #expect(Self.kid(try await h.issue().accessToken) == rotated.kid)
        _ = try await service.verifyAccessToken(VerifyRequest(token: before, checkRevoked: false))
    }

    @Test("instances starting together on a store without a key make one first key, whatever their clocks say")
    func oneFirstKey() async throws {
        let h = try await Harness.make()
        let configuration = h.service.configuration
        let databasePath = try TemporaryDirectory(prefix: "first-key").url.appendingPathComponent("token.sqlite").path
        // The file made and migrated, without a key (SQLite's schema is one instance's to make;
        // several instances starting on an empty PostgreSQL database are SharedTokenStoreTests').
        try SQLiteTokenStore(path: databasePath).migrate()
        // Four instances at once on it, their clocks an hour apart: one first key, and each signs
        // with it (one whose clock is behind the key's creation too).
        let kids = try await withThrowingTaskGroup(of: String.self) { group in
            for offset in 0..<4 {
                let clock = ManualClock(start: Date().addingTimeInterval(Double(offset) * 3600))
                group.addTask {
                    try await TokenService.start(
                        configuration: configuration, store: SQLiteTokenStore(path: databasePath), identity: h.identity.caller,
                        clock: clock.wallClock
                    ).keys.activeKid
                }
            }
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }
        #expect(kids.count == 4 && Set(kids).count == 1)
        let store = try SQLiteTokenStore(path: databasePath)
        #expect(try await store.keys().count == 1)
    }

    static func kid(_ token: String) -> String? {
        guard let data = Base64URL.decode(token.split(separator: ".")[0]),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return nil }
        return object["kid"] as? String
    }
}
