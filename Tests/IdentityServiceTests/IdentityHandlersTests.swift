import Foundation
import GatehouseContracts
import GatehouseTestSupport
import IdentityCore
import IdentityService
import ProtoCodec
import RPCRouting
import Testing
import IdentityPorts

/// The RPC methods through `LocalCaller`, which encodes and decodes every message.
@Suite struct IdentityHandlersTests {
    let strong = "glacier lantern marmalade"

    @Test func signUpCreatesUserAndSession() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        let reply = try await h.caller.call(
            IdentityAPI.signUp,
            SignUpRequest(email: " Zoe@Example.com ", password: strong, displayName: "Zoë", client: ClientInfo(userAgent: "ua", ip: "10.0.0.1")))
        #expect(reply.user.email == "Zoe@Example.com")
        #expect(reply.user.displayName == "Zoë")
        #expect(reply.user.version == 1)
        #expect(reply.user.settingsJSON == "{}")
        #expect(reply.user.id.count == 22)
        #expect(reply.tokens.accessToken == "at-\(reply.user.id)")
        let issued = try #require(h.tokens.requests.first)
        #expect(issued.userID == reply.user.id)
        #expect(issued.amr == ["pwd"])
        #expect(issued.claims.email == "Zoe@Example.com")
        #expect(issued.client.ip == "10.0.0.1")
        let stored = try #require(try await h.store.user(normalizedEmail: "zoe@example.com"))
        #expect(stored.passwordHash?.hasPrefix("$argon2id$v=19$m=1024,t=1,p=1$") == true)
        #expect(h.events.topics == ["user.created"])
        #expect(try h.events.decoded().first?.event.userID == reply.user.id)
    }

    @Test func signUpRefusesATakenEmailInAnyCase() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        _ = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "yan@example.com", password: strong))
        await expectCode(.emailExists) {
            try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "YAN@example.COM", password: strong))
        }
        #expect(try await h.store.count() == 1)
    }

    @Test func signUpRefusesWeakPasswordsWithReasons() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        do {
            _ = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "w@example.com", password: "Password"))
            Issue.record("accepted")
        } catch let error as RPCError {
            #expect(error.code == .weakPassword)
            #expect(error.details["reasons"] == "common_password")
        }
        #expect(try await h.store.count() == 0)
    }

    @Test func signInWithTheRightPassword() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        let created = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "xia@example.com", password: strong))
        let reply = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "XIA@example.com", password: strong))
        #expect(reply.user.id == created.user.id)
        #expect(reply.user.lastSignInAt != nil)
        #expect(h.tokens.requests.count == 2)
    }

    @Test("sign-up and sign-in ask the token service with what is left of their own deadline")
    func sessionCallsInheritTheDeadline() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        // Far from any default (LocalCaller's and the token client's are 2 s), so a fresh
        // budget could not match it by chance.
        let signUpDeadline = ContinuousClock.now + .seconds(7)
        _ = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "dee@example.com", password: strong), deadline: signUpDeadline)
        let signInDeadline = ContinuousClock.now + .seconds(9)
        _ = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "dee@example.com", password: strong), deadline: signInDeadline)
        #expect(h.tokens.deadlines == [signUpDeadline, signInDeadline])
    }

    @Test func signInNormalizesThePasswordWithNFKC() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        _ = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "nfkc@example.com", password: "ｇｌａｃｉｅｒ lantern"))
        _ = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "nfkc@example.com", password: "glacier lantern"))
    }

    @Test func wrongPasswordAndUnknownEmailLookAlikeAndBothHash() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        _ = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "vic@example.com", password: strong))
        let before = h.pool.completedJobs
        await expectCode(.invalidCredentials) {
            try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "vic@example.com", password: "glacier lantern marmaladE"))
        }
        #expect(h.pool.completedJobs == before + 1)
        await expectCode(.invalidCredentials) {
            try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "nobody@example.com", password: strong))
        }
        #expect(h.pool.completedJobs == before + 2)  // the dummy hash
        await expectCode(.invalidCredentials) {
            try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "vic@example.com", password: ""))
        }
    }

    @Test func disabledUsersCannotSignIn() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        let created = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "ula@example.com", password: strong))
        let disabled = try await h.caller.call(IdentityAPI.setDisabled, SetDisabledRequest(userID: created.user.id, disabled: true))
        #expect(disabled.disabled)
        await expectCode(.userDisabled) {
            try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "ula@example.com", password: strong))
        }
        // A wrong password still says invalid_credentials: disabled status is not revealed.
        await expectCode(.invalidCredentials) {
            try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "ula@example.com", password: "not the password"))
        }
        #expect(h.events.topics == ["user.created", "user.disabled"])
        let claims = try await h.caller.call(IdentityAPI.claimsForSession, ClaimsForSessionRequest(userID: created.user.id))
        #expect(claims.disabled)
        // Its sessions were revoked in the token service before the reply; a repeated call revokes again.
        #expect(h.tokens.revocations == [UserSessionsRequest(userID: created.user.id, reason: "user_disabled")])
        _ = try await h.caller.call(IdentityAPI.setDisabled, SetDisabledRequest(userID: created.user.id, disabled: true))
        #expect(h.tokens.revocations.count == 2)
        _ = try await h.caller.call(IdentityAPI.setDisabled, SetDisabledRequest(userID: created.user.id, disabled: false))
        #expect(h.tokens.revocations.count == 2)
    }

    @Test func signInUpgradesOutdatedAndImportedHashes() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        // A bcrypt user imported from elsewhere.
        let imported = try makeUser("import@example.com", hash: "$2b$04$bLemTfuRZpxjkIP4XVYqNu3ygZ2X8fParZXsNhsTKS4z3/AYJvwli")
        try await h.store.insert(imported)
        _ = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "import@example.com", password: "correct horse"))
        let upgraded = try #require(try await h.store.user(id: imported.id)?.passwordHash)
        #expect(upgraded.hasPrefix("$argon2id$v=19$m=1024,t=1,p=1$"))
        _ = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "import@example.com", password: "correct horse"))
        #expect(try await h.store.user(id: imported.id)?.passwordHash == upgraded)  // current: not rehashed again

        // An Argon2id hash with older (weaker) parameters.
        let old = try PasswordHashing.argon2idHash(Array("correct horse".utf8), parameters: Argon2Parameters(memoryKiB: 512, iterations: 1))
        let weak = try makeUser("old@example.com", hash: old)
        try await h.store.insert(weak)
        _ = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "old@example.com", password: "correct horse"))
        #expect(try await h.store.user(id: weak.id)?.passwordHash?.hasPrefix("$argon2id$v=19$m=1024,t=1,p=1$") == true)

        // scrypt ($7$) too.
        let scrypt = try makeUser("scrypt@example.com", hash: "$7$C/..../....SomeSaltValue1$TV82RVFLblX0UWFMImOMX2/Pk5ed3zsS3.tGsxzvR45")
        try await h.store.insert(scrypt)
        _ = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "scrypt@example.com", password: "correct horse"))
        #expect(try await h.store.user(id: scrypt.id)?.passwordHash?.hasPrefix("$argon2id$") == true)
    }

    @Test func getUpdateAndDelete() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        let created = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "tom@example.com", password: strong))
        let id = created.user.id
        #expect(try await h.caller.call(IdentityAPI.getUser, UserIDRequest(userID: id)).email == "tom@example.com")

        let updated = try await h.caller.call(
            IdentityAPI.updateProfile,
            UpdateProfileRequest(userID: id, displayName: "Tom", photoURL: "https://img.example.com/t.png", settingsJSON: #"{"lang":"fr"}"#, expectedVersion: 1))
        #expect(updated.version == 2)
        #expect(updated.displayName == "Tom")
        #expect(updated.photoURL == "https://img.example.com/t.png")
        #expect(updated.settingsJSON == #"{"lang":"fr"}"#)

        await expectCode(.versionConflict) {
            try await h.caller.call(IdentityAPI.updateProfile, UpdateProfileRequest(userID: id, displayName: "Stale", expectedVersion: 1))
        }
        // nil leaves a field alone; "" clears it.
        let cleared = try await h.caller.call(IdentityAPI.updateProfile, UpdateProfileRequest(userID: id, photoURL: ""))
        #expect(cleared.photoURL == "")
        #expect(cleared.displayName == "Tom")
        #expect(try await h.store.user(id: UserID(id))?.photoURL == nil)
        let noName = try await h.caller.call(IdentityAPI.updateProfile, UpdateProfileRequest(userID: id, displayName: "  "))
        #expect(noName.displayName == "")
        #expect(try await h.store.user(id: UserID(id))?.displayName == nil)

        _ = try await h.caller.call(IdentityAPI.deleteUser, UserIDRequest(userID: id))
        await expectCode(.userNotFound) { try await h.caller.call(IdentityAPI.getUser, UserIDRequest(userID: id)) }
        await expectCode(.userNotFound) { try await h.caller.call(IdentityAPI.deleteUser, UserIDRequest(userID: id)) }
        await expectCode(.userNotFound) { try await h.caller.call(IdentityAPI.updateProfile, UpdateProfileRequest(userID: id, displayName: "x")) }
        #expect(h.events.topics == ["user.created", "user.updated", "user.updated", "user.updated", "user.deleted"])
        // Deleting revoked its sessions before and after the row went; the repeated delete (a retry)
        // revoked them again.
        #expect(h.tokens.revocations == Array(repeating: UserSessionsRequest(userID: id, reason: "user_deleted"), count: 3))
        let claims = try await h.caller.call(IdentityAPI.claimsForSession, ClaimsForSessionRequest(userID: id))
        #expect(!claims.exists)
    }

    @Test func claimsForSessionReportsWhatTheTokenServiceNeeds() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        var user = try makeUser("claims@example.com")
        user.emailVerified = true
        user.customClaimsJSON = #"{"admin":true}"#
        user.tokensValidAfter = t0
        try await h.store.insert(user)
        let claims = try await h.caller.call(IdentityAPI.claimsForSession, ClaimsForSessionRequest(userID: user.id.rawValue))
        #expect(claims == UserClaims(exists: true, disabled: false, email: "claims@example.com", emailVerified: true,
            isAnonymous: false, customClaimsJSON: #"{"admin":true}"#, tokensValidAfter: t0))
        let missing = try await h.caller.call(IdentityAPI.claimsForSession, ClaimsForSessionRequest(userID: "'; --"))
        #expect(!missing.exists)
    }

    @Test func passwordStrengthRPC() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        let weak = try await h.caller.call(IdentityAPI.passwordStrength, PasswordStrengthRequest(password: "password1"))
        #expect(weak.score == 0)
        #expect(!weak.acceptable)
        #expect(weak.violations == ["common_password"])
        #expect(weak.reasons.contains { $0.code == "common_password" })
        let good = try await h.caller.call(IdentityAPI.passwordStrength, PasswordStrengthRequest(password: "Glacier-lantern-marmalade-47"))
        #expect(good.score >= 3)
        #expect(good.acceptable)
    }

    @Test func overloadedHashingRefusesAtOnceAndWritesNothing() async throws {
        let h = try await Harness(queueLimit: 0)
        defer { h.cleanup() }
        await expectCode(.overloaded) {
            try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "busy@example.com", password: strong))
        }
        #expect(try await h.store.count() == 0)
        let stats = try await h.caller.call(IdentityAPI.stats, Empty())
        #expect(stats.hashRejected == 1)
        #expect(stats.hashQueueLimit == 0)
        #expect(stats.hashQueueDepth == 0)
        #expect(stats.hashWorkers >= 1)
    }

    @Test func statsCountFinishedHashJobs() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        #expect(try await h.caller.call(IdentityAPI.stats, Empty()).hashCompleted == 0)
        _ = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "stats@example.com", password: strong))
        await expectCode(.invalidCredentials) {
            try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "nobody@example.com", password: strong))
        }
        let stats = try await h.caller.call(IdentityAPI.stats, Empty())
        #expect(stats.hashCompleted == 2)  // the sign-up's hash and the unknown email's dummy hash
        #expect(stats.hashRejected == 0)
        #expect(stats.hashBusyWorkers == 0)
    }

    @Test func realDefaultParametersEndToEnd() async throws {
        let h = try await Harness(argon2: .owasp)
        defer { h.cleanup() }
        _ = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "owasp@example.com", password: strong))
        let stored = try #require(try await h.store.user(normalizedEmail: "owasp@example.com")?.passwordHash)
        #expect(stored.hasPrefix("$argon2id$v=19$m=19456,t=2,p=1$"))
        _ = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "owasp@example.com", password: strong))
        #expect(try await h.store.user(normalizedEmail: "owasp@example.com")?.passwordHash == stored)
    }
}
