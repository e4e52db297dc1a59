import Crypto
import Foundation
@testable import SQLiteStores
import TokenPorts
import GRDB
import GatehouseContracts
import GatehouseTestSupport
import Testing
import TokenCore
@testable import TokenService
import RPCRouting
import GatehouseSupport

/// Migration 0002 moves the current refresh token onto the session row: tokens issued before it
/// behave exactly as they did (rotation, grace replay, reuse detection, revocation).
@Suite struct MigrationTests {
    @Test func tokensFromBeforeTheMigrationKeepTheirMeaning() async throws {
        let dir = try TemporaryDirectory(prefix: "token-migration")
        defer { dir.remove() }
        let path = dir.path("token.sqlite")
        let clock = ManualClock()
        let now = clock.now
        let secret = Data((0..<32).map { UInt8($0) })
        func token() -> String { Base64URL.encode(TokenService.secureRandom(32)) }
        func successor(_ token: String) -> String {
            Base64URL.encode(Data(HMAC<SHA256>.authenticationCode(for: Data(token.utf8), using: SymmetricKey(data: secret))))
        }
        @Sendable func ms(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }

        // The schema of migration 0001, with three sessions as the old code left them.
        let (a0, b0, c0) = (token(), token(), token())
        let (a1, b1, b2) = (successor(a0), successor(b0), successor(successor(b0)))
        do {
            let pool = try DatabasePool(path: path)
            try SQLiteTokenStore.migrator.migrate(pool, upTo: "0001-keys-sessions-refresh-tokens")
            try await pool.write { db in
                try db.execute(sql: "INSERT INTO meta (name, value) VALUES ('refresh-successor-key', ?)", arguments: [secret])
                for (id, user, revoked) in [("s-a", "user-a", false), ("s-b", "user-b", false), ("s-c", "user-c", true)] {
                    try db.execute(
                        sql: """
                            INSERT INTO session (id, userId, createdAt, authTime, amr, userAgent, ip, lastUsedAt, expiresAt, revokedAt, revokeReason)
                            VALUES (?, ?, ?, ?, 'pwd', 'ua', '127.0.0.1', ?, ?, ?, ?)
                            """,
                        arguments: [id, user, ms(now - 3600), ms(now - 3600), ms(now - 5), ms(now + 86_400),
                                    revoked ? ms(now - 60) : nil, revoked ? "sign_out" : ""])
                }
                func insert(_ token: String, _ session: String, usedAt: Date?, successor: String?) throws {
                    try db.execute(
                        sql: "INSERT INTO refreshToken (hash, sessionId, createdAt, usedAt, successorHash) VALUES (?, ?, ?, ?, ?)",
                        arguments: [TokenService.hash(token), session, ms(now - 3600), usedAt.map(ms), successor.map(TokenService.hash)])
                }
                // a: a0 rotated 5 s ago to a1 (current).
                try insert(a0, "s-a", usedAt: now - 5, successor: a1)
                try insert(a1, "s-a", usedAt: nil, successor: nil)
                // b: b0 → b1 an hour ago, b1 → b2 100 s ago (b2 current).
                try insert(b0, "s-b", usedAt: now - 3600, successor: b1)
                try insert(b1, "s-b", usedAt: now - 100, successor: b2)
                try insert(b2, "s-b", usedAt: nil, successor: nil)
                // c: revoked.
                try insert(c0, "s-c", usedAt: nil, successor: nil)
            }
        }

        var config = TokenConfiguration(issuer: "https://auth.test", audience: "app")
        config.refreshGrace = 10
        let identity = FakeIdentityService()
        for user in ["user-a", "user-b", "user-c"] { identity.set(user, UserClaims(email: "\(user)@example.com")) }
        let service = try await TokenService.start(
            configuration: config, store: SQLiteTokenStore(path: path), identity: identity.caller, clock: clock.wallClock)
        #expect(try await service.store.currentHash(sessionID: "s-a") == TokenService.hash(a1))
        #expect(try await service.store.currentHash(sessionID: "s-b") == TokenService.hash(b2))

        // a0 was rotated 5 s ago: a replay inside the grace window answers the same successor.
        let replay = try await service.refresh(RefreshRequest(refreshToken: a0))
        #expect(replay.refreshToken == a1)
        #expect(replay.sessionID == "s-a")
        // a1 is current: it rotates.
        let rotated = try await service.refresh(RefreshRequest(refreshToken: a1))
        #expect(rotated.refreshToken == successor(a1))
        #expect(try await service.store.currentHash(sessionID: "s-a") == TokenService.hash(successor(a1)))
        // b1 was rotated 100 s ago (past the window): reuse, and the session is revoked.
        await #expect(throws: TokenError.refreshTokenReused) { _ = try await service.refresh(RefreshRequest(refreshToken: b1)) }
        await #expect(throws: TokenError.sessionRevoked) { _ = try await service.refresh(RefreshRequest(refreshToken: b2)) }
        // c was revoked before the migration.
        await #expect(throws: TokenError.sessionRevoked) { _ = try await service.refresh(RefreshRequest(refreshToken: c0)) }
    }
}
