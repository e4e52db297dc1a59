import Foundation
import IdentityCore
import Testing

/// The rate windows, password reset codes, the operator's link codes and the codes a credential
/// change voids, as tables: no store, no clock (`Fixture.now`).
@Suite("Mail code rules: windows, reset, link codes")
struct MailCodeRulesTests {
    typealias F = Fixture

    struct WindowCase: Sendable, CustomTestStringConvertible {
        var name: String
        var madeAgo: [Int64]
        var perMinute: Int
        var perHour: Int
        var retryAfter: Int?
        var testDescription: String { name }
    }

    static let windowCases: [WindowCase] = [
        .init(name: "nothing made", madeAgo: [], perMinute: 1, perHour: 5, retryAfter: nil),
        .init(name: "made 59.999 s ago: 1 ms left, rounded up to 1 s", madeAgo: [59_999], perMinute: 1, perHour: 5, retryAfter: 1),
        .init(name: "made exactly 60 s ago: out of the minute", madeAgo: [60_000], perMinute: 1, perHour: 5, retryAfter: nil),
        .init(name: "made 1 ms ago: 59.999 s, rounded up to 60", madeAgo: [1], perMinute: 1, perHour: 5, retryAfter: 60),
        .init(name: "made now", madeAgo: [0], perMinute: 1, perHour: 5, retryAfter: 60),
        .init(name: "two a minute: the older one leaves first", madeAgo: [30_000, 10_000], perMinute: 2, perHour: 5, retryAfter: 30),
        .init(name: "in any order", madeAgo: [10_000, 30_000], perMinute: 2, perHour: 5, retryAfter: 30),
        .init(name: "one of two a minute: allowed", madeAgo: [10_000], perMinute: 2, perHour: 5, retryAfter: nil),
        .init(
            name: "five in the hour, the oldest 3599.999 s ago", madeAgo: [3_599_999, 3_000_000, 2_000_000, 1_000_000, 120_000],
            perMinute: 1, perHour: 5, retryAfter: 1),
        .init(
            name: "the oldest of five exactly 3600 s ago: four in the hour", madeAgo: [3_600_000, 3_000_000, 2_000_000, 1_000_000, 120_000],
            perMinute: 1, perHour: 5, retryAfter: nil),
        .init(
            name: "both windows full: the longer wait", madeAgo: [3_000_000, 2_000_000, 1_000_000, 100_000, 10_000], perMinute: 1,
            perHour: 5, retryAfter: 600),
        .init(name: "a limit of 0 counts as 1", madeAgo: [30_000], perMinute: 0, perHour: 0, retryAfter: 3_570),
        .init(name: "a limit of 0, nothing made", madeAgo: [], perMinute: 0, perHour: 0, retryAfter: nil),
    ]

    @Test("retryAfterSeconds: until the code that fills a window leaves it", arguments: windowCases)
    func windows(_ c: WindowCase) {
        #expect(MailCodeRules.retryAfterSeconds(made: c.madeAgo.map(F.ago), now: F.now, perMinute: c.perMinute, perHour: c.perHour) == c.retryAfter)
    }

    @Test("the stores read codes made after one hour before now")
    func recentSince() {
        #expect(MailCodeRules.recentSince(F.now) == F.nowMs - 3_600_000)
    }

    // MARK: Password reset requests

    struct ResetCase: Sendable, CustomTestStringConvertible {
        var name: String
        var user: MailCodeUser?
        var email = "old@example.com"
        var madeAgo: [Int64] = []
        var perMinute = 1
        var perHour = 5
        var outcome: PasswordResetOutcome
        var testDescription: String { name }
    }

    static let resetCases: [ResetCase] = [
        .init(name: "no user", user: nil, outcome: .noAccount),
        .init(name: "disabled", user: F.user(disabled: true), outcome: .noAccount),
        .init(name: "the user's address is another one now", user: F.user(), email: "new@example.com", outcome: .noAccount),
        .init(name: "anonymous", user: F.user(email: nil, normalized: nil), outcome: .noAccount),
        .init(name: "nothing made: queued", user: F.user(), outcome: .queued),
        .init(name: "verified or not: queued", user: F.user(verified: true), outcome: .queued),
        .init(name: "one 59.999 s ago: limited", user: F.user(), madeAgo: [59_999], outcome: .limited),
        .init(name: "one exactly 60 s ago: queued", user: F.user(), madeAgo: [60_000], outcome: .queued),
        .init(
            name: "five in the hour: limited", user: F.user(), madeAgo: [3_599_999, 3_000_000, 2_000_000, 1_000_000, 120_000],
            outcome: .limited),
        .init(
            name: "the fifth exactly 3600 s ago: queued", user: F.user(), madeAgo: [3_600_000, 3_000_000, 2_000_000, 1_000_000, 120_000],
            outcome: .queued),
        .init(name: "a per-minute limit of 0 allows none", user: F.user(), perMinute: 0, outcome: .limited),
        .init(name: "a per-hour limit of 0 allows none", user: F.user(), perHour: 0, outcome: .limited),
    ]

    @Test("requestPasswordReset: outcome and writes", arguments: resetCases)
    func requestPasswordReset(_ c: ResetCase) {
        let code = NewResetCode(codeHash: F.hash, expiresAt: F.expiresAt)
        let decision = MailCodeRules.requestPasswordReset(
            user: c.user, email: c.email, recentCodes: c.madeAgo.map(F.ago), code: code, mail: "reset mail", now: F.now,
            perMinute: c.perMinute, perHour: c.perHour)
        #expect(decision.outcome == c.outcome)
        var purge = F.writes()
        purge.purgeResetsCreatedBefore = F.nowMs - 86_400_000
        var queued = purge
        queued.voidResets = true
        queued.newResetCode = code
        queued.mail = "reset mail"
        switch c.outcome {
        case .noAccount: #expect(decision.writes == nil)
        case .limited: #expect(decision.writes == purge)  // rows older than a day go; nothing else
        case .queued: #expect(decision.writes == queued)
        }
    }

    // MARK: Using a reset code

    struct UseResetCase: Sendable, CustomTestStringConvertible {
        var name: String
        var code: StoredResetCode?
        var user: MailCodeUser?
        var refused: Bool
        var testDescription: String { name }
    }

    static let useResetCases: [UseResetCase] = [
        .init(name: "live code, enabled user", code: F.resetCode(), user: F.user(), refused: false),
        .init(name: "live code, verified user", code: F.resetCode(), user: F.user(verified: true), refused: false),
        .init(name: "unknown code", code: nil, user: F.user(), refused: true),
        .init(name: "used", code: F.resetCode(usedAt: F.ago(1)), user: F.user(), refused: true),
        .init(name: "expires exactly now", code: F.resetCode(expiresAt: F.nowMs), user: F.user(), refused: true),
        .init(name: "expired", code: F.resetCode(expiresAt: F.ago(1)), user: F.user(), refused: true),
        .init(name: "another user's code", code: F.resetCode(user: F.otherID), user: F.user(), refused: true),
        .init(name: "user gone", code: F.resetCode(), user: nil, refused: true),
        .init(name: "user disabled", code: F.resetCode(), user: F.user(disabled: true), refused: true),
    ]

    @Test("usePasswordReset: the code used, codes voided, the password set; or invalidResetCode", arguments: useResetCases)
    func usePasswordReset(_ c: UseResetCase) {
        let result = Result { () throws(IdentityError) -> MailCodeWrites<String> in
            try MailCodeRules.usePasswordReset(code: c.code, userID: F.userID, user: c.user, passwordHash: "$argon2id$new", now: F.now)
        }
        var expected = F.writes()
        expected.useResetCode = 41
        expected.voidResets = true
        expected.voidEmailActions = [.changeEmail]
        expected.password = .reset(hash: "$argon2id$new")
        #expect(result == (c.refused ? .failure(.invalidResetCode) : .success(expected)))
    }

    @Test("a password change voids reset codes and pending changes; an operator's write also pending verifications")
    func credentialChangesVoid() {
        let password: MailCodeWrites<String> = MailCodeRules.passwordChanged(userID: F.userID)
        var expected = F.writes()
        expected.voidResets = true
        expected.voidEmailActions = [.changeEmail]
        #expect(password == expected)
        let operatorWrite: MailCodeWrites<String> = MailCodeRules.operatorChangedCredentials(userID: F.userID)
        expected.voidEmailActions = [.changeEmail, .verifyEmail]
        #expect(operatorWrite == expected)  // revert codes stay
    }

    // MARK: Link codes

    struct LinkCase: Sendable, CustomTestStringConvertible {
        var name: String
        var kind: LinkCodeKind
        var user: MailCodeUser?
        var normalized = "old@example.com"
        var refused: Bool
        var testDescription: String { name }
    }

    static let linkCases: [LinkCase] = [
        .init(name: "reset link", kind: .passwordReset, user: F.user(), refused: false),
        .init(name: "verification link", kind: .verifyEmail, user: F.user(), refused: false),
        .init(name: "reset, no user", kind: .passwordReset, user: nil, refused: true),
        .init(name: "verification, disabled", kind: .verifyEmail, user: F.user(disabled: true), refused: true),
        .init(name: "reset, another address now", kind: .passwordReset, user: F.user(), normalized: "new@example.com", refused: true),
        .init(name: "verification, anonymous", kind: .verifyEmail, user: F.user(email: nil, normalized: nil), refused: true),
    ]

    @Test("linkCode: voids the kind's codes and stores the new one, no mail; or userNotFound", arguments: linkCases)
    func linkCode(_ c: LinkCase) {
        let result = Result { () throws(IdentityError) -> MailCodeWrites<String> in
            try MailCodeRules.linkCode(
                c.kind, user: c.user, email: "Old@Example.com", emailNormalized: c.normalized, codeHash: F.hash, expiresAt: F.expiresAt)
        }
        var expected = F.writes()
        switch c.kind {
        case .passwordReset:
            expected.voidResets = true
            expected.newResetCode = NewResetCode(codeHash: F.hash, expiresAt: F.expiresAt)
        case .verifyEmail:
            expected.voidEmailActions = [.verifyEmail]
            expected.newEmailAction = NewEmailAction(
                purpose: .verifyEmail, codeHash: F.hash, email: "Old@Example.com", emailNormalized: "old@example.com", expiresAt: F.expiresAt)
        }
        #expect(result == (c.refused ? .failure(.userNotFound) : .success(expected)))
    }
}
