import IdentityCore
import Testing

@Suite struct PasswordPolicyTests {
    let policy = PasswordPolicy()

    @Test func acceptsLongUncommonPasswordsWithoutCompositionRules() {
        #expect(policy.violations(of: "glacier lantern marmalade").isEmpty)
        #expect(policy.violations(of: "zzqqxxvvwt").isEmpty)  // all lowercase: fine
        #expect(policy.violations(of: "пароль-длинный").isEmpty)
    }

    @Test func lengthLimits() {
        #expect(policy.violations(of: "") == [.empty])
        #expect(policy.violations(of: "a7#kQ2z").contains(.tooShort))
        #expect(policy.violations(of: "a7#kQ2zX").isEmpty)
        #expect(policy.violations(of: String(repeating: "x7", count: 128)).isEmpty)  // 256
        #expect(policy.violations(of: String(repeating: "x", count: 257)).contains(.tooLong))
    }

    @Test func minimumIsConfigurable() {
        let strict = PasswordPolicy(minLength: 12)
        #expect(strict.violations(of: "a7#kQ2zXy9").contains(.tooShort))
        #expect(strict.violations(of: "a7#kQ2zXy9pl").isEmpty)
    }

    @Test func lengthCountsUnicodeScalarsAfterNFKC() {
        // "é" decomposed (2 scalars) composes to 1 under NFKC: 7 characters, too short.
        let decomposed = "abcdef" + "e\u{301}"
        #expect(decomposed.unicodeScalars.count == 8)
        #expect(policy.violations(of: decomposed).contains(.tooShort))
        // Emoji: each scalar counts.
        #expect(policy.violations(of: "🔥🔥🔥🔥🔥🔥🔥🔥").isEmpty)
    }

    @Test func normalizesWithNFKC() {
        #expect(PasswordPolicy.normalize("ｐａｓｓｗｏｒｄ１") == "password1")
        #expect(PasswordPolicy.normalize("ﬁle-cabinet") == "file-cabinet")
    }

    @Test(arguments: ["password", "PASSWORD", "Password1", "12345678", "qwertyuiop", "ｐａｓｓｗｏｒｄ", "iloveyou", "sunshine"])
    func blocksCommonPasswordsIgnoringCase(_ password: String) {
        #expect(policy.violations(of: password).contains(.common))
    }

    @Test func blocklistHasTenThousandEntries() {
        #expect(CommonPasswords.count > 9_900)
        #expect(CommonPasswords.count <= 10_000)
    }

    @Test func refusesTheEmailAsPassword() {
        #expect(policy.violations(of: "alice.smith@example.com", email: "alice.smith@example.com").contains(.matchesEmail))
        #expect(policy.violations(of: "Alice.Smith", email: "alice.smith@example.com").contains(.matchesEmail))
    }

    @Test func aMegabytePasswordIsTooLongWithoutWork() {
        let huge = String(repeating: "a", count: 1_000_000)
        #expect(policy.violations(of: huge) == [.tooLong])
    }

    @Test func brokenEncodingIsRefused() {
        #expect(policy.violations(of: "abc\u{FFFD}defghij").contains(.invalidCharacters))
        #expect(policy.violations(of: "abc\u{0}defghij").contains(.invalidCharacters))
    }

    @Test func validateThrowsWeakPasswordWithReasons() {
        do {
            _ = try policy.validate("password")
            Issue.record("accepted")
        } catch let error as IdentityError {
            #expect(error == .weakPassword([.common]))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }
}

@Suite struct PasswordStrengthTests {
    @Test func commonPasswordsScoreZero() {
        let result = PasswordStrength.estimate("password1")
        #expect(result.score == 0)
        #expect(result.reasons.contains { $0.code == "common_password" })
    }

    @Test func emptyScoresZero() {
        #expect(PasswordStrength.estimate("").score == 0)
    }

    @Test func repeatsAndSequencesAreWeak() {
        let repeats = PasswordStrength.estimate("zzzzzzzzzzzz")
        #expect(repeats.score <= 1)
        #expect(repeats.reasons.contains { $0.code == "repeats" })
        let sequence = PasswordStrength.estimate("lmnopqrstuvw")
        #expect(sequence.score <= 1)
        #expect(sequence.reasons.contains { $0.code == "sequence" })
    }

    @Test func longMixedPassphrasesScoreHigh() {
        #expect(PasswordStrength.estimate("Glacier-lantern-marmalade-47").score >= 3)
        #expect(PasswordStrength.estimate("v9#Lq2!xT7wz@Rb4").score == 4)
    }

    @Test func scoreGrowsWithLength() {
        let short = PasswordStrength.estimate("k7#q")
        let long = PasswordStrength.estimate("k7#qM2x!pR9z")
        #expect(short.score < long.score)
        #expect(short.reasons.contains { $0.code == "short" })
    }

    @Test func userDataLowersTheScore() {
        let plain = PasswordStrength.estimate("bartholomew2024!")
        let withName = PasswordStrength.estimate("bartholomew2024!", userInputs: ["bartholomew@example.com"])
        #expect(withName.bits < plain.bits)
        #expect(withName.reasons.contains { $0.code == "contains_user_data" })
    }

    @Test func containedCommonPasswordIsNamed() {
        let result = PasswordStrength.estimate("xQ7dragon")
        #expect(result.reasons.contains { $0.code == "contains_common_password" })
    }

    @Test func scoresStayInRange() {
        for p in ["a", "ab", "abcdefgh", String(repeating: "x", count: 256), String(repeating: "x", count: 1_000_000), "🔥🔥"] {
            let s = PasswordStrength.estimate(p).score
            #expect((0...4).contains(s))
        }
    }
}
