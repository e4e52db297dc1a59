import Foundation
import GatehouseContracts
import GatehouseSupport
import GatehouseTestSupport
import IdentityCore
import IdentityService
import RPCRouting
import Testing
import IdentityPorts

/// Custom claims (`identity.setCustomClaims`), default settings and the settings merge patch of
/// `identity.updateProfile` (issue 18, part H4).
@Suite struct AdminHandlersTests {
    let strong = "glacier lantern marmalade"
    /// The in-memory store, SQLite and PostgreSQL (issue 24).
    static let stores: [StoreKind] = StoreKind.allCases + [.postgres]

    /// The harness's handlers with `defaults` as the settings of new users.
    func caller(_ h: Harness, defaults: String) -> LocalCaller {
        var handlers = h.handlers
        handlers.defaultSettingsJSON = defaults
        return LocalCaller(router: handlers.router())
    }

    @Test(arguments: Self.stores)
    func customClaimsAreStoredAndHandedToTheTokenService(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let created = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "cleo@example.com", password: strong))
        let user = try await h.caller.call(
            IdentityAPI.setCustomClaims, SetCustomClaimsRequest(userID: created.user.id, claimsJSON: #" {"role": "admin", "tier": 2} "#))
        #expect(user.id == created.user.id && user.version == created.user.version + 1)
        // What the token service reads at the next refresh.
        let claims = try await h.caller.call(IdentityAPI.claimsForSession, ClaimsForSessionRequest(userID: created.user.id))
        #expect(claims.customClaimsJSON == #"{"role":"admin","tier":2}"#)
        #expect(h.events.topics.last == "user.updated")
        // ... and a new session gets them too.
        _ = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "cleo@example.com", password: strong))
        #expect(h.tokens.requests.last?.claims.customClaimsJSON == #"{"role":"admin","tier":2}"#)
        // "{}" and "" clear them.
        for clear in ["{}", ""] {
            _ = try await h.caller.call(IdentityAPI.setCustomClaims, SetCustomClaimsRequest(userID: created.user.id, claimsJSON: #"{"x":1}"#))
            _ = try await h.caller.call(IdentityAPI.setCustomClaims, SetCustomClaimsRequest(userID: created.user.id, claimsJSON: clear))
            #expect(try await h.caller.call(IdentityAPI.claimsForSession, ClaimsForSessionRequest(userID: created.user.id)).customClaimsJSON == "")
        }
    }

    @Test(arguments: Self.stores)
    func customClaimsRefusals(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let created = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "dora@example.com", password: strong))
        let id = created.user.id
        for reserved in ["sub", "email", "auth_time", "gatehouse_admin"] {
            do {
                _ = try await h.caller.call(IdentityAPI.setCustomClaims, SetCustomClaimsRequest(userID: id, claimsJSON: #"{"ok":1,"\#(reserved)":"x"}"#))
                Issue.record("\(reserved) accepted")
            } catch let error as RPCError {
                #expect(error.code == .invalidArgument)
                #expect(error.message.contains("`\(reserved)`"), "\(error.message)")
            }
        }
        await expectCode(.invalidArgument) {
            try await h.caller.call(IdentityAPI.setCustomClaims, SetCustomClaimsRequest(userID: id, claimsJSON: #"{"k":""# + String(repeating: "v", count: 1000) + #""}"#))
        }
        await expectCode(.invalidArgument) { try await h.caller.call(IdentityAPI.setCustomClaims, SetCustomClaimsRequest(userID: id, claimsJSON: "[1]")) }
        await expectCode(.invalidArgument) { try await h.caller.call(IdentityAPI.setCustomClaims, SetCustomClaimsRequest(userID: id, claimsJSON: "{nope")) }
        await expectCode(.invalidArgument) { try await h.caller.call(IdentityAPI.setCustomClaims, SetCustomClaimsRequest(userID: "not an id", claimsJSON: "{}")) }
        await expectCode(.userNotFound) {
            try await h.caller.call(IdentityAPI.setCustomClaims, SetCustomClaimsRequest(userID: UserID.random().rawValue, claimsJSON: "{}"))
        }
        // Nothing was written.
        let user = try await h.caller.call(IdentityAPI.getUser, UserIDRequest(userID: id))
        #expect(user.version == created.user.version)
    }

    @Test("only the service's own key may set custom claims: no role is among its callers")
    func administrativeOnly() {
        #expect(IdentityAPI.setCustomClaims.callers.isEmpty)
        #expect(IdentityAPI.setDisabled.callers.isEmpty)
    }

    @Test(arguments: Self.stores)
    func newUsersGetTheDefaultSettings(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let defaults = #"{"biometric_enabled":false,"auto_backup":false,"theme":"dark"}"#
        let caller = caller(h, defaults: defaults)
        let signedUp = try await caller.call(IdentityAPI.signUp, SignUpRequest(email: "eve@example.com", password: strong))
        #expect(signedUp.user.settingsJSON == defaults)
        let anonymous = try await caller.call(IdentityAPI.signInAnonymously, SignInAnonymouslyRequest())
        #expect(anonymous.user.settingsJSON == defaults)
        #expect(try await caller.call(IdentityAPI.getUser, UserIDRequest(userID: anonymous.user.id)).settingsJSON == defaults)
        // Without a configured default: {}.
        #expect(try await h.caller.call(IdentityAPI.signInAnonymously, SignInAnonymouslyRequest()).user.settingsJSON == "{}")
    }

    @Test(arguments: Self.stores)
    func settingsPatchMergesInsideTheUpdate(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let caller = caller(h, defaults: #"{"biometric_enabled":false,"auto_backup":false,"theme":"dark","n":{"a":1,"b":2}}"#)
        let created = try await caller.call(IdentityAPI.signUp, SignUpRequest(email: "fay@example.com", password: strong))
        let id = created.user.id
        let patched = try await caller.call(
            IdentityAPI.updateProfile,
            UpdateProfileRequest(userID: id, settingsPatchJSON: #"{"theme":"light","auto_backup":null,"n":{"b":null,"c":[3]},"new":true}"#))
        #expect(patched.settingsJSON == #"{"biometric_enabled":false,"theme":"light","n":{"a":1,"c":[3]},"new":true}"#)
        #expect(patched.version == created.user.version + 1)
        // The patch and a replacing document together are refused.
        await expectCode(.invalidArgument) {
            try await caller.call(IdentityAPI.updateProfile, UpdateProfileRequest(userID: id, settingsJSON: "{}", settingsPatchJSON: "{}"))
        }
        await expectCode(.invalidArgument) {
            try await caller.call(IdentityAPI.updateProfile, UpdateProfileRequest(userID: id, settingsPatchJSON: "[1]"))
        }
    }

    @Test(arguments: Self.stores)
    func aMergeOverTheLimitWritesNothing(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let created = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "gus@example.com", password: strong))
        let id = created.user.id
        let half = String(repeating: "x", count: 9_000)
        _ = try await h.caller.call(IdentityAPI.updateProfile, UpdateProfileRequest(userID: id, settingsPatchJSON: #"{"a":"\#(half)"}"#))
        let before = try await h.caller.call(IdentityAPI.getUser, UserIDRequest(userID: id))
        do {
            _ = try await h.caller.call(
                IdentityAPI.updateProfile, UpdateProfileRequest(userID: id, displayName: "Gus", settingsPatchJSON: #"{"b":"\#(half)"}"#))
            Issue.record("a 18 KB document was accepted")
        } catch let error as RPCError {
            #expect(error.code == .invalidArgument)
            #expect(error.message.hasPrefix("settings:") && error.message.contains("16 KiB"), "\(error.message)")
        }
        let after = try await h.caller.call(IdentityAPI.getUser, UserIDRequest(userID: id))
        #expect(after == before)  // neither the settings nor the display name, nor the version
        #expect(after.displayName == "")
    }

    /// Settings nested `depth` objects deep: `{"a":{"a":...{}...}}`.
    static func nested(_ depth: Int) -> String {
        String(repeating: #"{"a":"#, count: depth - 1) + "{}" + String(repeating: "}", count: depth - 1)
    }

    @Test("the replace path reads settings by the merge's rules: 65 levels deep is refused, 64 accepted", arguments: Self.stores)
    func replacedSettingsFollowTheMergeRules(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let created = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "hal@example.com", password: strong))
        let id = created.user.id
        do {
            _ = try await h.caller.call(IdentityAPI.updateProfile, UpdateProfileRequest(userID: id, settingsJSON: Self.nested(JSONTree.maxDepth + 1)))
            Issue.record("settings 65 deep were accepted")
        } catch let error as RPCError {
            #expect(error.code == .invalidArgument)
            #expect(error.message.hasPrefix("settingsJSON:") && error.message.contains("64"), "\(error.message)")
        }
        #expect(try await h.caller.call(IdentityAPI.getUser, UserIDRequest(userID: id)).version == created.user.version)
        let fine = try await h.caller.call(IdentityAPI.updateProfile, UpdateProfileRequest(userID: id, settingsJSON: Self.nested(JSONTree.maxDepth)))
        #expect(fine.settingsJSON == Self.nested(JSONTree.maxDepth))
        // ... and a patch merges into it.
        let merged = try await h.caller.call(IdentityAPI.updateProfile, UpdateProfileRequest(userID: id, settingsPatchJSON: #"{"b":1}"#))
        #expect(merged.settingsJSON == String(Self.nested(JSONTree.maxDepth).dropLast()) + #","b":1}"#)
    }

    @Test("stored settings a merge cannot read are refused, never replaced by {}", arguments: Self.stores)
    func unreadableStoredSettingsAreKept(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let created = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "ida@example.com", password: strong))
        let id = UserID(rawValue: created.user.id)
        // Written before the replace path had the merge's rules (the store accepts it).
        let deep = Self.nested(JSONTree.maxDepth + 1)
        _ = try await h.store.update(id: id, expectedVersion: nil, now: t0) { $0.settingsJSON = deep }
        let before = try await h.caller.call(IdentityAPI.getUser, UserIDRequest(userID: id.rawValue))
        do {
            _ = try await h.caller.call(IdentityAPI.updateProfile, UpdateProfileRequest(userID: id.rawValue, settingsPatchJSON: #"{"theme":"dark"}"#))
            Issue.record("the patch was merged into {}")
        } catch let error as RPCError {
            #expect(error.code == .invalidArgument)
            #expect(error.message.hasPrefix("settings:") && error.message.contains("stored settings"), "\(error.message)")
        }
        let after = try await h.caller.call(IdentityAPI.getUser, UserIDRequest(userID: id.rawValue))
        #expect(after == before)
        #expect(after.settingsJSON == deep)
    }

    @Test("claims full of \\b fit the store: the stored compact form is what is measured", arguments: Self.stores)
    func claimsWithShortEscapesFitTheStore(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let created = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "jon@example.com", password: strong))
        let claims = #"{"k":""# + String(repeating: #"\b"#, count: 495) + #"x"}"#
        #expect(claims.utf8.count == 999)
        let user = try await h.caller.call(IdentityAPI.setCustomClaims, SetCustomClaimsRequest(userID: created.user.id, claimsJSON: claims))
        #expect(user.version == created.user.version + 1)
        #expect(try await h.caller.call(IdentityAPI.claimsForSession, ClaimsForSessionRequest(userID: created.user.id)).customClaimsJSON == claims)
    }
}
