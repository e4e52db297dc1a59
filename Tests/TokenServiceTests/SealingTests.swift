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

@Suite("Secrets at rest: sealing, upgrade of plain-text databases, key rotation")
struct SealingTests {
    static let keyA = [UInt8](repeating: 0xA1, count: 32)
    static let keyB = [UInt8](repeating: 0xB2, count: 32)

    /// Every signing key's `encrypted` flag and the stored refresh secret's length.
    static func stored(_ dir: URL) throws -> (flags: [Bool], secretLength: Int) {
        let queue = try DatabaseQueue(path: dir.appendingPathComponent("token.sqlite").path)
        defer { try? queue.close() }
        return try queue.read { db in
            (try Bool.fetchAll(db, sql: "SELECT encrypted FROM signingKey ORDER BY created_at"),
             try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE name = 'refresh-successor-key'")?.count ?? -1)
        }
    }

    /// Every byte of the database and its WAL, to look for key material in the clear.
    static func fileBytes(_ dir: URL) -> Data {
        var all = Data()
        for suffix in ["", "-wal"] {
            all.append((try? Data(contentsOf: dir.appendingPathComponent("token.sqlite" + suffix))) ?? Data())
        }
        return all
    }

    @Test("a database made without a key-encryption key is sealed at the first start with one; the same keys keep signing")
    func upgradeSealsPlainText() async throws {
        let dir = try TemporaryDirectory(prefix: "token-seal").url
        let plain = try await Harness.make(dir: dir)
        let kid = plain.service.keys.activeKid
        let tokens = try await plain.issue()
        #expect(try Self.stored(dir).flags == [false])
        #expect(try Self.stored(dir).secretLength == 32)
        #expect(Self.fileBytes(dir).range(of: Data("PRIVATE KEY".utf8)) != nil, "a plain-text key is visible before sealing")

        let sealed = try await Harness.make(encryptionKey: Self.keyA, dir: dir)
        sealed.identity.set("user-1", UserClaims(email: "a@example.com", emailVerified: true))
        #expect(sealed.service.keys.activeKid == kid)
        #expect(try Self.stored(dir).flags == [true])
        #expect(try Self.stored(dir).secretLength == 60)
        // The plain text is gone from the file and its WAL, not only unlinked.
        #expect(Self.fileBytes(dir).range(of: Data("PRIVATE KEY".utf8)) == nil)
        // The token issued before still refreshes, and the access token still verifies.
        let refreshed = try await sealed.service.refresh(RefreshRequest(refreshToken: tokens.refreshToken))
        _ = try await sealed.service.verifyAccessToken(VerifyRequest(token: refreshed.accessToken, checkRevoked: true))

        // Without the key, start-up fails and says what is missing.
        do {
            _ = try await Harness.make(dir: dir)
            Issue.record("started without the key-encryption key")
        } catch let error as RPCError {
            #expect(error.message.contains("GATEHOUSE_KEY_ENCRYPTION_KEY_FILE"))
        }
        // With another key: refused too, nothing decrypted with the wrong key.
        do {
            _ = try await Harness.make(encryptionKey: Self.keyB, dir: dir)
            Issue.record("started with the wrong key-encryption key")
        } catch let error as RPCError {
            #expect(error.message.contains("does not decrypt"))
        }
    }

    @Test("rotation re-seals every secret with the new key in one go; a wrong old key changes nothing; a lost one discards")
    func rotation() async throws {
        let dir = try TemporaryDirectory(prefix: "token-rotate").url
        let path = dir.appendingPathComponent("token.sqlite").path
        let first = try await Harness.make(encryptionKey: Self.keyA, dir: dir)
        let kid = first.service.keys.activeKid
        let tokens = try await first.issue()
        let before = Self.fileBytes(dir)

        #expect(throws: SQLiteTokenStore.RewrapError.self) {
            try SQLiteTokenStore.rewrap(path: path, oldKey: .init(data: Self.keyB), newKey: .init(data: Self.keyB), discardUnreadable: false)
        }
        let report = try SQLiteTokenStore.rewrap(
            path: path, oldKey: .init(data: Self.keyA), newKey: .init(data: Self.keyB), discardUnreadable: false)
        #expect(report == SQLiteTokenStore.RewrapReport(keys: 1, discardedKeys: 0, discardedSecret: false))
        #expect(Self.fileBytes(dir) != before)
        let rotated = try await Harness.make(encryptionKey: Self.keyB, dir: dir)
        rotated.identity.set("user-1", UserClaims(email: "a@example.com", emailVerified: true))
        #expect(rotated.service.keys.activeKid == kid)
        let next = try await rotated.service.refresh(RefreshRequest(refreshToken: tokens.refreshToken))

        // The key is lost: the sealed secrets are deleted, a new signing key is made, and
        // refresh tokens still work (they are stored as hashes, not sealed).
        let lost = try SQLiteTokenStore.rewrap(path: path, oldKey: nil, newKey: .init(data: Self.keyA), discardUnreadable: true)
        #expect(lost == SQLiteTokenStore.RewrapReport(keys: 0, discardedKeys: 1, discardedSecret: true))
        let fresh = try await Harness.make(encryptionKey: Self.keyA, dir: dir)
        fresh.identity.set("user-1", UserClaims(email: "a@example.com", emailVerified: true))
        #expect(fresh.service.keys.activeKid != kid)
        let after = try await fresh.service.refresh(RefreshRequest(refreshToken: next.refreshToken))
        _ = try await fresh.service.verifyAccessToken(VerifyRequest(token: after.accessToken, checkRevoked: true))
    }
}
