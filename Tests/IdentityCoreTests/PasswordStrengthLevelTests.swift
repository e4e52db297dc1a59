import IdentityCore
import Testing

/// The three levels of a strength meter (A9): weak when the policy refuses or score 0–1,
/// medium for 2–3, strong for 4.
@Suite struct PasswordStrengthLevelTests {
    @Test func mapping() {
        #expect((0...4).map { PasswordStrength.Level(score: $0, acceptable: true) } == [.weak, .weak, .medium, .medium, .strong])
        #expect((0...4).allSatisfy { PasswordStrength.Level(score: $0, acceptable: false) == .weak })
        #expect(PasswordStrength.Level.allCases.map(\.rawValue) == ["weak", "medium", "strong"])
    }
}
