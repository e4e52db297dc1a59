import Foundation
import IdentityPorts
import GatehouseContracts
import GatehouseTestSupport
import IdentityCore
@testable import IdentityService
import Mail
import PostgresStores
import Testing

/// The mail flows when two identity instances share one PostgreSQL database (issue 24): what
/// SQLite's single writer gives for free, the PostgreSQL store keeps with row and advisory locks.
@Suite("Mail flows: two instances on one PostgreSQL database")
struct MailRaceTests {
    let now = Date(timeIntervalSince1970: 1_750_000_000)

    func mail(_ kind: String, to: String) -> MailMessage {
        MailMessage(kind: kind, from: "Gatehouse <no-reply@example.com>", to: to, subject: kind, text: "code", date: now)
    }

    func hash() -> Data { IdentityHandlers.resetCodeHash(IdentityHandlers.newResetCode()) }

    @Test("concurrent reset requests for one user on two instances stay within the per-minute limit: one queued, one code, one mail")
    func resetLimit() async throws {
        let (first, second, cleanup) = try await twoPostgresStores()
        defer { cleanup() }
        let user = try makeUser("race@example.com")
        try await first.insert(user)
        let outcomes = try await withThrowingTaskGroup(of: PasswordResetOutcome.self) { group in
            for n in 0..<8 {
                let store = n.isMultiple(of: 2) ? first : second
                let (code, message) = (hash(), mail("password_reset", to: "race@example.com"))
                group.addTask {
                    try await store.storePasswordReset(
                        userID: user.id, email: "race@example.com", codeHash: code, expiresAt: now.addingTimeInterval(3600),
                        mail: message, now: now, perMinute: 1, perHour: 5)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.filter { $0 == .queued }.count == 1)
        #expect(outcomes.filter { $0 == .limited }.count == 7)
        #expect(try await second.probes.passwordResetCount(userID: user.id) == 1)
        #expect(try await queuedMails(in: first, kind: "password_reset").count == 1)
    }

    @Test("two confirmations of one email-change code on two instances: exactly one succeeds, one revert code, one notice")
    func confirmOnce() async throws {
        let (first, second, cleanup) = try await twoPostgresStores()
        defer { cleanup() }
        for round in 0..<5 {
            let user = try makeUser("old\(round)@example.com")
            try await first.insert(user)
            let code = hash()
            try await first.storeEmailChange(
                userID: user.id, from: "old\(round)@example.com", to: try EmailAddress("new\(round)@example.com"), codeHash: code,
                expiresAt: now.addingTimeInterval(3600), now: now, perMinute: 1, perHour: 5
            ) { _ in mail("change_email", to: "new\(round)@example.com") }
            let results = await withTaskGroup(of: Result<UserID, any Error>.self) { group in
                for store in [first, second] {
                    let revert = hash()
                    group.addTask {
                        await Result {
                            try await store.confirmEmailChange(
                                codeHash: code, revertCodeHash: revert, revertExpiresAt: now.addingTimeInterval(7 * 86_400), now: now
                            ) { old, _ in mail("email_changed", to: old) }
                        }
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            #expect(results.filter { (try? $0.get()) == user.id }.count == 1, "round \(round)")
            for case .failure(let error) in results {
                #expect((error as? IdentityError)?.code == .invalidEmailChangeCode, "\(error)")
            }
            #expect(try await second.user(id: user.id)?.emailNormalized == "new\(round)@example.com")
            #expect(try await first.probes.emailChangeCodeCount(userID: user.id, purpose: .revertEmail, now: now) == 1)
            #expect(try await queuedMails(in: second, kind: "email_changed").filter { $0.to == "old\(round)@example.com" }.count == 1)
        }
    }

    @Test("a sign-up of the old address racing the confirmation on the other instance never takes it: the user's row or its revert code holds it")
    func reservationRace() async throws {
        let (first, second, cleanup) = try await twoPostgresStores()
        defer { cleanup() }
        for round in 0..<40 {
            let old = "owner\(round)@example.com"
            let user = try makeUser(old)
            try await first.insert(user)
            let code = hash()
            try await first.storeEmailChange(
                userID: user.id, from: old, to: try EmailAddress("moved\(round)@example.com"), codeHash: code,
                expiresAt: now.addingTimeInterval(3600), now: now, perMinute: 1, perHour: 5
            ) { _ in mail("change_email", to: "moved\(round)@example.com") }
            let squatter = try makeUser(old)
            async let confirmed = Result {
                try await first.confirmEmailChange(
                    codeHash: code, revertCodeHash: hash(), revertExpiresAt: now.addingTimeInterval(7 * 86_400), now: now
                ) { old, _ in mail("email_changed", to: old) }
            }
            // Started a little later each round, to land anywhere in the confirmation's transaction.
            let delay = Duration.microseconds(250 * (round % 20))
            async let signedUp = Result {
                try await Task.sleep(for: delay)
                try await second.insert(squatter)
            }
            let (confirm, signUp) = await (confirmed, signedUp)
            #expect((try? confirm.get()) == user.id, "round \(round)")
            guard case .failure(let error) = signUp else {
                Issue.record("round \(round): the old address was taken while reserved")
                continue
            }
            #expect((error as? IdentityError)?.code == .emailExists, "\(error)")
            #expect(try await second.user(normalizedEmail: old) == nil)
        }
    }
}

extension Result where Failure == any Error {
    /// The outcome of an async `body`.
    init(_ body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
