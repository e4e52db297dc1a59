import Foundation
import IdentityCore
import Testing

/// Email verification codes as tables: storing one, asking for one within the limits, using one.
@Suite("Mail code rules: email verification")
struct MailCodeRulesVerificationTests {
    typealias F = Fixture

    static let code = NewEmailAction(
        purpose: .verifyEmail, codeHash: F.hash, email: "Old@Example.com", emailNormalized: "old@example.com", expiresAt: F.expiresAt)

    /// What storing `code` writes: older verification codes voided, the code, its mail.
    static var stored: MailCodeWrites<String> {
        var writes = F.writes()
        writes.voidEmailActions = [.verifyEmail]
        writes.newEmailAction = code
        writes.mail = "verify mail"
        return writes
    }

    @Test("a code stored with its mail voids the user's older verification codes")
    func verificationCode() {
        #expect(MailCodeRules.verificationCode(userID: F.userID, code: Self.code, mail: "verify mail") == Self.stored)
    }

    @Test(
        "after an update: the code only when the updated user has its address",
        arguments: [
            (F.user(), true), (F.user(email: "New@Example.com", normalized: "new@example.com"), false),
            (F.user(email: nil, normalized: nil), false), (F.user(verified: true, disabled: true), true),
        ])
    func verificationAfterUpdate(_ user: MailCodeUser, _ stores: Bool) {
        let writes = MailCodeRules.verificationAfterUpdate(user: user, code: Self.code, mail: "verify mail")
        #expect(writes == (stores ? Self.stored : nil))
    }

    struct RequestCase: Sendable, CustomTestStringConvertible {
        var name: String
        var user: MailCodeUser?
        var madeAgo: [Int64] = []
        var perMinute = 1
        var perHour = 5
        var outcome: EmailVerificationOutcome
        var testDescription: String { name }
    }

    static let requestCases: [RequestCase] = [
        .init(name: "no user", user: nil, outcome: .noAccount),
        .init(name: "disabled", user: F.user(disabled: true), outcome: .noAccount),
        .init(name: "disabled and verified: noAccount first", user: F.user(verified: true, disabled: true), outcome: .noAccount),
        .init(name: "another address now", user: F.user(email: "New@Example.com", normalized: "new@example.com"), outcome: .noAccount),
        .init(name: "anonymous", user: F.user(email: nil, normalized: nil), outcome: .noAccount),
        .init(name: "verified", user: F.user(verified: true), outcome: .alreadyVerified),
        .init(name: "verified and limited: alreadyVerified first", user: F.user(verified: true), madeAgo: [1], outcome: .alreadyVerified),
        .init(name: "nothing made: queued", user: F.user(), outcome: .queued),
        .init(name: "one 59.999 s ago: 1 s to wait", user: F.user(), madeAgo: [59_999], outcome: .limited(retryAfterSeconds: 1)),
        .init(name: "one exactly 60 s ago: queued", user: F.user(), madeAgo: [60_000], outcome: .queued),
        .init(name: "one just now: 60 s to wait", user: F.user(), madeAgo: [0], outcome: .limited(retryAfterSeconds: 60)),
        .init(
            name: "five in the hour (voided ones count)", user: F.user(), madeAgo: [3_000_000, 2_400_000, 1_800_000, 1_200_000, 600_000],
            outcome: .limited(retryAfterSeconds: 600)),
        .init(
            name: "the fifth exactly 3600 s ago: queued", user: F.user(), madeAgo: [3_600_000, 2_400_000, 1_800_000, 1_200_000, 600_000],
            outcome: .queued),
        .init(name: "two a minute allowed, one made", user: F.user(), madeAgo: [1_000], perMinute: 2, outcome: .queued),
    ]

    @Test("requestEmailVerification: outcome, and writes only when queued", arguments: requestCases)
    func requestEmailVerification(_ c: RequestCase) {
        let decision = MailCodeRules.requestEmailVerification(
            user: c.user, code: Self.code, mail: "verify mail", recentCodes: c.madeAgo.map(F.ago), now: F.now, perMinute: c.perMinute,
            perHour: c.perHour)
        #expect(decision.outcome == c.outcome)
        #expect(decision.writes == (c.outcome == .queued ? Self.stored : nil))
    }

    struct UseCase: Sendable, CustomTestStringConvertible {
        var name: String
        var code: StoredEmailAction?
        var user: MailCodeUser?
        /// nil: refused with `error`.
        var markVerified: Bool?
        var error: IdentityError?
        var testDescription: String { name }
    }

    static let useCases: [UseCase] = [
        .init(name: "live code, unverified user: verified", code: F.action(), user: F.user(), markVerified: true),
        .init(name: "verified already: codes voided, nothing else", code: F.action(), user: F.user(verified: true), markVerified: false),
        .init(name: "unknown code", code: nil, user: F.user(), error: .invalidVerificationCode),
        .init(name: "used (voided by a newer one)", code: F.action(usedAt: F.ago(1)), user: F.user(), error: .invalidVerificationCode),
        .init(name: "expires exactly now", code: F.action(expiresAt: F.nowMs), user: F.user(), error: .invalidVerificationCode),
        .init(name: "a change code", code: F.action(.changeEmail), user: F.user(), error: .invalidVerificationCode),
        .init(name: "user gone", code: F.action(), user: nil, error: .invalidVerificationCode),
        .init(
            name: "the user has another address now", code: F.action(),
            user: F.user(email: "New@Example.com", normalized: "new@example.com"), error: .invalidVerificationCode),
        .init(name: "disabled: userDisabled, the code stays", code: F.action(), user: F.user(disabled: true), error: .userDisabled),
        .init(
            name: "disabled at another address: the address first", code: F.action(),
            user: F.user(email: "New@Example.com", normalized: "new@example.com", disabled: true), error: .invalidVerificationCode),
    ]

    @Test("useEmailVerification: verification codes voided and whether to mark verified; or the refusal", arguments: useCases)
    func useEmailVerification(_ c: UseCase) {
        let result = Result { () throws(IdentityError) -> (writes: MailCodeWrites<String>, markVerified: Bool) in
            try MailCodeRules.useEmailVerification(code: c.code, user: c.user, now: F.now)
        }
        switch result {
        case .success(let decision):
            var voided = F.writes()
            voided.voidEmailActions = [.verifyEmail]
            #expect(decision.writes == voided)
            #expect(decision.markVerified == c.markVerified)
        case .failure(let error):
            #expect(c.markVerified == nil)
            #expect(error == c.error)
        }
    }
}
