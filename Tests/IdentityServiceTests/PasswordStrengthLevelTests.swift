import Foundation
import GatehouseContracts
import IdentityCore
import IdentityService
import RPCRouting
import Testing

/// A9: `identity.passwordStrength` answers a level for seed 001's three-bar meter.
@Suite("Password strength level (A9)")
struct PasswordStrengthLevelRPCTests {
    @Test("common passwords are weak whatever their mix of characters; a medium one; a long passphrase of uncommon words is strong")
    func levels() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        func strength(_ password: String) async throws -> PasswordStrengthResponse {
            try await h.caller.call(IdentityAPI.passwordStrength, PasswordStrengthRequest(password: password))
        }
        for common in ["password", "Password1"] {
            let answer = try await strength(common)
            #expect(answer.level == "weak", "\(common): \(answer)")
            #expect(!answer.acceptable)
        }
        for password in ["greenapple12", "coffee-table"] {
            let medium = try await strength(password)
            #expect(medium.level == "medium", "\(password): \(medium)")
            #expect(medium.acceptable && (2...3).contains(medium.score))
        }
        let strong = try await strength("quixotic pelican marmalade zeppelin fjord")
        #expect(strong.level == "strong", "\(strong)")
        #expect(strong.acceptable && strong.score == 4)
    }

    @Test("the level always agrees with the score and the policy")
    func agreesWithScore() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        for password in ["", "abc", "abcdefgh", "k7#qM2x!pR9z", "Glacier-lantern-marmalade-47", "v9#Lq2!xT7wz@Rb4", "correct horse battery staple"] {
            let answer = try await h.caller.call(IdentityAPI.passwordStrength, PasswordStrengthRequest(password: password))
            #expect(answer.level == PasswordStrength.Level(score: Int(answer.score), acceptable: answer.acceptable).rawValue, "\(password)")
        }
    }
}
