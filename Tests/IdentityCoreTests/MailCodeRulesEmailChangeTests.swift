import Foundation
import IdentityCore
import Testing

/// The confirmed email change as tables: the request, its confirmation and the revert.
@Suite("Mail code rules: email change")
struct MailCodeRulesEmailChangeTests {
    typealias F = Fixture

    static let newAddress = try! EmailAddress("New@Example.com")

    struct RequestCase: Sendable, CustomTestStringConvertible {
        var name: String
        var user: MailCodeUser? = F.user()
        var from = "old@example.com"
        var taken = false
        var madeAgo: [Int64] = []
        var error: IdentityError?
        var testDescription: String { name }
    }

    static let requestCases: [RequestCase] = [
        .init(name: "free address, nothing made: stored"),
        .init(name: "verified user: stored, the state kept with the code", user: F.user(verified: true)),
        .init(name: "no user", user: nil, error: .userNotFound),
        .init(name: "disabled", user: F.user(disabled: true), error: .userDisabled),
        .init(name: "disabled and the address taken: disabled first", user: F.user(disabled: true), taken: true, error: .userDisabled),
        .init(name: "moved meanwhile", from: "older@example.com", error: .versionConflict(current: 7)),
        .init(name: "anonymous", user: F.user(email: nil, normalized: nil), error: .versionConflict(current: 7)),
        .init(name: "taken or reserved", taken: true, error: .emailExists),
        .init(name: "taken and limited: taken first", taken: true, madeAgo: [1], error: .emailExists),
        .init(name: "one 59.999 s ago", madeAgo: [59_999], error: .mailRateLimited(retryAfterSeconds: 1)),
        .init(name: "one exactly 60 s ago: stored", madeAgo: [60_000]),
        .init(
            name: "five in the hour (voided ones count)", madeAgo: [3_599_000, 3_000_000, 2_000_000, 1_000_000, 120_000],
            error: .mailRateLimited(retryAfterSeconds: 1)),
        .init(name: "the fifth exactly 3600 s ago: stored", madeAgo: [3_600_000, 3_000_000, 2_000_000, 1_000_000, 120_000]),
    ]

    @Test("requestEmailChange: the older change codes voided, the code stored, the mail to the current address; or the refusal", arguments: requestCases)
    func requestEmailChange(_ c: RequestCase) {
        let result = Result { () throws(IdentityError) -> MailCodeWrites<String> in
            try MailCodeRules.requestEmailChange(
                user: c.user, from: c.from, to: Self.newAddress, addressTaken: c.taken, recentCodes: c.madeAgo.map(F.ago), codeHash: F.hash,
                expiresAt: F.expiresAt, now: F.now, perMinute: 1, perHour: 5, mail: { "change mail for \($0)" })
        }
        var expected = F.writes()
        expected.voidEmailActions = [.changeEmail]
        expected.newEmailAction = NewEmailAction(
            purpose: .changeEmail, codeHash: F.hash, email: "New@Example.com", emailNormalized: "new@example.com",
            fromEmailNormalized: "old@example.com", previousVerified: c.user?.emailVerified ?? false, expiresAt: F.expiresAt)
        expected.mail = "change mail for Old@Example.com"
        #expect(result == (c.error.map { .failure($0) } ?? .success(expected)))
    }

    static let changeCode = F.action(.changeEmail, email: "New@Example.com", normalized: "new@example.com", from: "old@example.com")

    struct ConfirmCase: Sendable, CustomTestStringConvertible {
        var name: String
        var code: StoredEmailAction? = MailCodeRulesEmailChangeTests.changeCode
        var user: MailCodeUser? = F.user()
        var taken = false
        var error: IdentityError?
        var testDescription: String { name }
    }

    static let confirmCases: [ConfirmCase] = [
        .init(name: "live code, free address: confirmed"),
        .init(name: "verified user: the revert code keeps it", user: F.user(verified: true)),
        .init(name: "unknown code", code: nil, error: .invalidEmailChangeCode),
        .init(name: "used or voided", code: with(changeCode) { $0.usedAt = F.ago(1) }, error: .invalidEmailChangeCode),
        .init(name: "expires exactly now", code: with(changeCode) { $0.expiresAt = F.nowMs }, error: .invalidEmailChangeCode),
        .init(name: "a revert code", code: with(changeCode) { $0.purpose = .revertEmail }, error: .invalidEmailChangeCode),
        .init(name: "user gone", user: nil, error: .userNotFound),
        .init(name: "disabled", user: F.user(disabled: true), error: .userDisabled),
        .init(name: "disabled and taken: disabled first", user: F.user(disabled: true), taken: true, error: .userDisabled),
        .init(
            name: "the user moved since the code was made", user: F.user(email: "Other@Example.com", normalized: "other@example.com"),
            error: .invalidEmailChangeCode),
        .init(name: "anonymous now", user: F.user(email: nil, normalized: nil), error: .invalidEmailChangeCode),
        .init(name: "moved and taken: the code first", user: F.user(normalized: "other@example.com"), taken: true, error: .invalidEmailChangeCode),
        .init(name: "the new address taken or reserved meanwhile", taken: true, error: .emailExists),
    ]

    @Test("confirmEmailChange: the old address reserved, the new one set, codes used and voided, a revert code and the notice; or the refusal", arguments: confirmCases)
    func confirmEmailChange(_ c: ConfirmCase) {
        let result = Result { () throws(IdentityError) -> MailCodeWrites<String> in
            try MailCodeRules.confirmEmailChange(
                code: c.code, user: c.user, addressTaken: c.taken, revertCodeHash: F.revertHash, revertExpiresAt: F.expiresAt, now: F.now,
                notice: { "notice to \($0): now \($1)" })
        }
        var expected = F.writes()
        expected.reserveAddress = "old@example.com"
        expected.newAddress = AddressWrite(email: "New@Example.com", emailNormalized: "new@example.com")
        expected.useEmailAction = 52
        expected.voidEmailActions = [.changeEmail, .verifyEmail]
        expected.voidResets = true
        expected.newEmailAction = NewEmailAction(
            purpose: .revertEmail, codeHash: F.revertHash, email: "Old@Example.com", emailNormalized: "old@example.com",
            fromEmailNormalized: "new@example.com", previousVerified: c.user?.emailVerified ?? false, expiresAt: F.expiresAt)
        expected.mail = "notice to Old@Example.com: now New@Example.com"
        #expect(result == (c.error.map { .failure($0) } ?? .success(expected)))
    }

    static let revertCode = F.action(
        .revertEmail, email: "Old@Example.com", normalized: "old@example.com", from: "new@example.com", previousVerified: true)
    /// The user after a confirmed change: at the new address.
    static let changedUser = F.user(email: "New@Example.com", normalized: "new@example.com", verified: true)

    struct RevertCase: Sendable, CustomTestStringConvertible {
        var name: String
        var code: StoredEmailAction? = MailCodeRulesEmailChangeTests.revertCode
        var user: MailCodeUser? = MailCodeRulesEmailChangeTests.changedUser
        var taken = false
        var reset = false
        var error: IdentityError?
        var testDescription: String { name }
    }

    static let revertCases: [RevertCase] = [
        .init(name: "live code: restored"),
        .init(name: "with a password reset", reset: true),
        .init(name: "the user moved again since (revert codes outlive later changes)", user: F.user(normalized: "third@example.com")),
        .init(name: "unknown code", code: nil, error: .invalidEmailChangeCode),
        .init(name: "used", code: with(revertCode) { $0.usedAt = F.ago(1) }, error: .invalidEmailChangeCode),
        .init(name: "expires exactly now", code: with(revertCode) { $0.expiresAt = F.nowMs }, error: .invalidEmailChangeCode),
        .init(name: "a change code", code: with(revertCode) { $0.purpose = .changeEmail }, error: .invalidEmailChangeCode),
        .init(name: "user gone", user: nil, error: .userNotFound),
        .init(name: "disabled", user: F.user(disabled: true), reset: true, error: .userDisabled),
        .init(name: "the old address taken by another user", taken: true, error: .emailExists),
    ]

    @Test("revertEmailChange: the old address back, codes used and voided (later reverts too), an optional reset; or the refusal", arguments: revertCases)
    func revertEmailChange(_ c: RevertCase) {
        let reset = NewResetCode(codeHash: F.revertHash, expiresAt: F.expiresAt)
        let result = Result { () throws(IdentityError) -> MailCodeWrites<String> in
            try MailCodeRules.revertEmailChange(
                code: c.code, user: c.user, addressTaken: c.taken, now: F.now, reset: c.reset ? (reset, { "reset mail to \($0)" }) : nil)
        }
        var expected = F.writes()
        expected.newAddress = AddressWrite(email: "Old@Example.com", emailNormalized: "old@example.com")
        expected.useEmailAction = 52
        expected.voidEmailActions = [.changeEmail, .verifyEmail]
        expected.voidRevertCodesAfter = 52
        expected.voidResets = true
        if c.reset {
            expected.password = .clear
            expected.newResetCode = reset
            expected.mail = "reset mail to Old@Example.com"
        }
        #expect(result == (c.error.map { .failure($0) } ?? .success(expected)))
    }
}

/// `value` changed by `change`.
func with<T>(_ value: T, _ change: (inout T) -> Void) -> T {
    var copy = value
    change(&copy)
    return copy
}
