import Foundation
@testable import SQLiteStores
import IdentityPorts
import GatehouseContracts
import GatehouseSupport
import GatehouseTestSupport
import GRDB
import IdentityCore
@testable import IdentityService
import PostgresNIO
import RPCRouting
import Testing

/// The change log (issue 21, migration 0009): every write path of a user records exactly its
/// kinds of change and the user after it (no password hash), in the write's transaction; a
/// sign-in records nothing. Real SQLite files and PostgreSQL databases (the same triggers,
/// in plpgsql), the handlers, a manual clock.
@Suite("Identity: change log written by the users triggers")
struct ChangeLogTests {
    let strong = "glacier lantern marmalade"

    func sqlite(_ h: Harness) throws -> SQLiteUserStore { try #require(h.store as? SQLiteUserStore) }

    /// Every change in the log, in order.
    func log(_ h: Harness) async throws -> [UserChange] { try await h.logStorage.listChanges(afterSeq: 0, limit: 1000).changes }

    /// The kinds of the changes after `count` earlier ones.
    func kinds(_ h: Harness, after count: Int) async throws -> [[String]] { try await log(h).dropFirst(count).map(\.kinds) }

    func signUp(_ h: Harness, _ email: String) async throws -> AuthenticatedCaller {
        let reply = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: email, password: strong))
        return AuthenticatedCaller(userID: reply.user.id, sessionID: "sid-\(email)", authTime: h.clock.now)
    }

    func user(_ h: Harness, _ id: String) async throws -> UserRecord { try #require(try await h.store.user(id: UserID(id))) }

    /// The log's user of its last change is the stored user, as `GET /v1/me` shows it.
    func expectLastUserIsStored(_ h: Harness, _ id: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let last = try #require(try await log(h).last, sourceLocation: sourceLocation)
        let stored = try await user(h, id)
        #expect(last.userID == id && last.user == User(stored), sourceLocation: sourceLocation)
        #expect(last.occurredAt == stored.updatedAt, sourceLocation: sourceLocation)
    }

    /// The log JSON's key of a `users` column (the same in both stores): `email_normalized` →
    /// `emailNormalized`, `photo_url` → `photoURL`.
    static func jsonKey(_ column: String) -> String {
        let parts = column.split(separator: "_").map(String.init)
        return parts[0] + parts.dropFirst().map { $0 == "url" ? "URL" : $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
    }

    @Test("every column of users is in the log's user JSON (under its camelCase key) or in the explicit excluded list; the JSON never has the password hash")
    func everyColumnCovered() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        let me = try await signUp(h, "ada@example.com")
        let store = try sqlite(h)
        let (columns, json) = try await store.read { db in
            let columns = try Row.fetchAll(db, sql: "PRAGMA table_info(users)").map { $0["name"] as String }
            let json = try String.fetchOne(db, sql: "SELECT \(SQLiteUserStore.changeLogUserJSON("users")) FROM users")
            return (columns, json)
        }
        let text = try #require(json)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        let keys = Set(object.keys)
        #expect(columns.count >= 18)
        for column in columns {
            #expect(keys.contains(Self.jsonKey(column)) != SQLiteUserStore.changeLogExcludedColumns.contains(column), "column \(column)")
        }
        #expect(keys.subtracting(columns.map(Self.jsonKey)) == ["hasPassword"])
        #expect(SQLiteUserStore.changeLogExcludedColumns.contains("password_hash"))
        let hash = try #require(try await user(h, me.userID).passwordHash)
        #expect(!text.contains(hash) && (object["hasPassword"] as? Int) == 1)
    }

    @Test("the update trigger is not even part of a sign-in stamp's or the sweep's statement (UPDATE OF), only of statements that set a compared column")
    func triggerNotCodedForSignIn() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        func runsTrigger(_ sql: String) async throws -> Bool {
            try await sqlite(h).read { db in try Row.fetchAll(db, sql: "EXPLAIN " + sql).contains { ($0["opcode"] as String) == "Program" } }
        }
        #expect(try await !runsTrigger("UPDATE users SET last_sign_in_at = 1 WHERE id = 'x'"))
        #expect(try await !runsTrigger("UPDATE users SET session_activity_at = max(coalesce(session_activity_at, 0), 1) WHERE id = 'x'"))
        #expect(try await runsTrigger("UPDATE users SET last_sign_in_at = 1, password_hash = 'h' WHERE id = 'x'"))
        #expect(try await runsTrigger("UPDATE users SET display_name = 'a' WHERE id = 'x'"))
    }

    @Test("PostgreSQL: every column of users is in the log's user JSON (in camelCase) or in the excluded list; the JSON never has the password hash")
    func everyColumnCoveredPostgres() async throws {
        let h = try await Harness(kind: .postgres)
        defer { h.cleanup() }
        let me = try await signUp(h, "ada@example.com")
        _ = try await h.caller.call(IdentityAPI.updateProfile, UpdateProfileRequest(userID: me.userID, displayName: "Ada"))
        let columns = try await h.stringsRaw(
            sqlite: "", postgres: "SELECT column_name::text FROM information_schema.columns WHERE table_name = 'users' AND table_schema = current_schema()")
        let text = try #require(try await h.stringsRaw(sqlite: "", postgres: "SELECT user_json FROM user_changes").first)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        let keys = Set(object.keys)
        #expect(columns.count >= 18)
        for column in columns {
            #expect(keys.contains(Self.jsonKey(column)) != SQLiteUserStore.changeLogExcludedColumns.contains(column), "column \(column)")
        }
        #expect(keys.subtracting(columns.map(Self.jsonKey)) == ["hasPassword"])
        let hash = try #require(try await user(h, me.userID).passwordHash)
        #expect(!text.contains(hash) && (object["hasPassword"] as? Int) == 1 && (object["isAnonymous"] as? Int) == 0)
    }

    @Test("PostgreSQL: the update trigger is only of statements that set a compared column (UPDATE OF): never of a sign-in stamp or the sweep's activity")
    func triggerColumnsPostgres() async throws {
        let h = try await Harness(kind: .postgres)
        defer { h.cleanup() }
        let columns = try await h.stringsRaw(sqlite: "", postgres: """
            SELECT a.attname::text FROM pg_trigger t JOIN pg_attribute a ON a.attrelid = t.tgrelid AND a.attnum = ANY (t.tgattr)
            WHERE t.tgname = 'users_change_log_update'
            """)
        #expect(Set(columns) == [
            "display_name", "photo_url", "settings", "email", "email_verified", "providers", "password_hash", "is_anonymous",
            "custom_claims", "disabled",
        ])
    }

    @Test("profile: name and photo → profile, settings → settings, both at once sorted; writing the same values again records nothing; sign-in, a rehash and a password change record nothing", arguments: StoreKind.kept)
    func profileAndSignIn(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let me = try await signUp(h, "ada@example.com")
        #expect(try await log(h).isEmpty)  // creating a user is not a change
        h.clock.advance(by: 1)
        _ = try await h.caller.call(IdentityAPI.updateProfile, UpdateProfileRequest(userID: me.userID, displayName: "Ada"))
        try await expectLastUserIsStored(h, me.userID)
        _ = try await h.caller.call(IdentityAPI.updateProfile, UpdateProfileRequest(userID: me.userID, photoURL: "https://example.com/a.png"))
        _ = try await h.caller.call(IdentityAPI.updateProfile, UpdateProfileRequest(userID: me.userID, settingsJSON: #"{"theme":"dark"}"#))
        try await expectLastUserIsStored(h, me.userID)
        _ = try await h.caller.call(
            IdentityAPI.updateProfile, UpdateProfileRequest(userID: me.userID, displayName: "Ada L.", settingsPatchJSON: #"{"lang":"en"}"#))
        #expect(try await kinds(h, after: 0) == [["profile"], ["profile"], ["settings"], ["profile", "settings"]])
        // The same values again: the version moves, the log does not.
        _ = try await h.caller.call(IdentityAPI.updateProfile, UpdateProfileRequest(userID: me.userID, displayName: "Ada L."))
        // Sign-ins (a stamp), a rehash at sign-in, a password change alone: nothing.
        _ = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "ada@example.com", password: strong))
        try await h.store.recordSignIn(id: UserID(me.userID), at: h.clock.now, newPasswordHash: "$argon2id$rehash", replacing: nil)
        let stored = try await user(h, me.userID)
        try await h.store.recordSignIn(id: UserID(me.userID), at: h.clock.now, newPasswordHash: "$argon2id$rehash2", replacing: stored.passwordHash)
        let fresh = AuthenticatedCaller(userID: me.userID, sessionID: me.sessionID, authTime: h.clock.now)
        _ = try await h.caller.call(IdentityAPI.changePassword, ChangePasswordRequest(caller: fresh, password: "another fine passphrase"))
        #expect(try await log(h).count == 4)
    }

    @Test("admin: claims → claims, disable → disabled, enable → enabled; link identity → providers (password and the provider)", arguments: StoreKind.kept)
    func adminAndProviders(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let me = try await signUp(h, "bob@example.com")
        _ = try await h.caller.call(IdentityAPI.setCustomClaims, SetCustomClaimsRequest(userID: me.userID, claimsJSON: #"{"role":"admin"}"#))
        _ = try await h.caller.call(IdentityAPI.setDisabled, SetDisabledRequest(userID: me.userID, disabled: true))
        try await expectLastUserIsStored(h, me.userID)
        _ = try await h.caller.call(IdentityAPI.setDisabled, SetDisabledRequest(userID: me.userID, disabled: false))
        h.clock.advance(by: 5)
        try await h.store.linkIdentity(provider: "google.com", subject: "g-1", to: UserID(me.userID), at: h.clock.now)
        #expect(try await kinds(h, after: 0) == [["claims"], ["disabled"], ["enabled"], ["providers"]])
        let linked = try #require(try await log(h).last)
        #expect(linked.user?.providers == ["google.com", "password"] && linked.occurredAt == h.clock.now.roundedToMilliseconds)
        try await expectLastUserIsStored(h, me.userID)
    }

    @Test("upgrading an anonymous user → email, profile, providers, upgraded (the user as stored, not anonymous, password provider)", arguments: StoreKind.kept)
    func upgrade(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let anonymous = try await h.caller.call(IdentityAPI.signInAnonymously, SignInAnonymouslyRequest()).user
        let caller = AuthenticatedCaller(userID: anonymous.id, sessionID: "sid-anon", authTime: h.clock.now)
        _ = try await h.caller.call(
            IdentityAPI.upgradeAnonymous, UpgradeAnonymousRequest(caller: caller, email: "cat@example.com", password: strong, displayName: "Cat"))
        #expect(try await kinds(h, after: 0) == [["email", "profile", "providers", "upgraded"]])
        let change = try #require(try await log(h).last)
        #expect(change.user?.isAnonymous == false && change.user?.providers == ["password"] && change.user?.email == "cat@example.com")
        try await expectLastUserIsStored(h, anonymous.id)
    }

    @Test("email: verification → email_verified; a pending change nothing; the confirmed change of a verified address → email; its revert → email", arguments: StoreKind.kept)
    func emailFlows(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let me = try await signUp(h, "dan@example.com")
        _ = try await h.caller.call(IdentityAPI.sendEmailVerification, SendEmailVerificationRequest(caller: me))
        let verify = try #require(try await queuedMails(in: h.logStorage, kind: "verify_email").last?.code)
        _ = try await h.caller.call(IdentityAPI.confirmEmailVerification, EmailCodeRequest(code: verify))
        #expect(try await kinds(h, after: 0) == [["email_verified"]])

        let fresh = AuthenticatedCaller(userID: me.userID, sessionID: me.sessionID, authTime: h.clock.now)
        _ = try await h.caller.call(IdentityAPI.changeEmail, ChangeEmailRequest(caller: fresh, email: "dan2@example.com"))
        #expect(try await log(h).count == 1)  // a pending change is not a change
        let change = try #require(try await queuedMails(in: h.logStorage, kind: "change_email").last?.code)
        _ = try await h.caller.call(IdentityAPI.confirmEmailChange, EmailCodeRequest(code: change))
        // The address was verified before and is verified after: only the address changed.
        #expect(try await kinds(h, after: 1) == [["email"]])
        try await expectLastUserIsStored(h, me.userID)
        let revert = try #require(try await queuedMails(in: h.logStorage, kind: "email_changed").last?.code)
        _ = try await h.caller.call(IdentityAPI.revertEmailChange, EmailCodeRequest(code: revert))
        // The old address comes back verified as it was; a revert that also clears the password
        // (its own statement) would add a `providers` change.
        #expect(try await kinds(h, after: 2).first == ["email"])
        #expect(try await log(h).map(\.userID).allSatisfy { $0 == me.userID })
        let last = try #require(try await log(h).last)
        #expect(last.user?.email == "dan@example.com")
    }

    @Test("password reset confirm → email_verified when the address was unverified (the new hash alone is not a change)", arguments: StoreKind.kept)
    func passwordReset(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let me = try await signUp(h, "eve@example.com")
        #expect(await h.handlers.passwordResets.sendPasswordReset(normalizedEmail: "eve@example.com", locale: "en") == .queued)
        let code = try #require(try await queuedMails(in: h.logStorage, kind: "password_reset").last?.code)
        _ = try await h.caller.call(IdentityAPI.confirmPasswordReset, ConfirmPasswordResetRequest(code: code, password: "another fine passphrase"))
        #expect(try await kinds(h, after: 0) == [["email_verified"]])
        try await expectLastUserIsStored(h, me.userID)
    }

    @Test("import in update mode → profile; creating by import records nothing", arguments: StoreKind.kept)
    func importUpdate(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        var imported = ImportedUser(id: "firebase-local-id-0000000009", email: "fay@example.com", displayName: "Fay")
        imported.passwordHash = try PasswordHashing.argon2idHash(Array("old argon passphrase".utf8), parameters: .testing)
        _ = try await h.caller.call(IdentityAPI.importUsers, ImportUsersRequest(users: [imported], mode: "skip"))
        #expect(try await log(h).isEmpty)
        imported.displayName = "Fay B."
        _ = try await h.caller.call(IdentityAPI.importUsers, ImportUsersRequest(users: [imported], mode: "update"))
        #expect(try await kinds(h, after: 0) == [["profile"]])
        try await expectLastUserIsStored(h, "firebase-local-id-0000000009")
    }

    @Test("delete: the user's earlier changes leave the log and one `deleted` without a user stays; others' changes stay", arguments: StoreKind.kept)
    func delete(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let me = try await signUp(h, "gus@example.com")
        let other = try await signUp(h, "hal@example.com")
        _ = try await h.caller.call(IdentityAPI.updateProfile, UpdateProfileRequest(userID: me.userID, displayName: "Gus"))
        _ = try await h.caller.call(IdentityAPI.updateProfile, UpdateProfileRequest(userID: other.userID, displayName: "Hal"))
        _ = try await h.caller.call(IdentityAPI.updateProfile, UpdateProfileRequest(userID: me.userID, settingsJSON: #"{"a":1}"#))
        _ = try await h.caller.call(IdentityAPI.deleteUser, UserIDRequest(userID: me.userID))
        let changes = try await log(h)
        #expect(changes.map(\.seq) == [2, 4])
        #expect(changes.map(\.userID) == [other.userID, me.userID])
        #expect(changes.last?.kinds == ["deleted"] && changes.last?.user == nil)
        let raw = try await h.stringsRaw(
            sqlite: "SELECT coalesce(user_json, '') FROM user_changes", postgres: "SELECT coalesce(user_json, '') FROM user_changes")
        #expect(!raw.joined().contains("gus@example.com"))
    }

    @Test("migration to an existing account: the anonymous user's change is `migrated` (alone, no user) and its sessions are revoked with reason migrated", arguments: StoreKind.kept)
    func migration(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        _ = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: "ivy@example.com", password: strong))
        let anonymous = try await h.caller.call(IdentityAPI.signInAnonymously, SignInAnonymouslyRequest()).user
        let caller = AuthenticatedCaller(userID: anonymous.id, sessionID: "sid-anon", authTime: h.clock.now)
        _ = try await h.caller.call(
            IdentityAPI.updateProfile, UpdateProfileRequest(userID: anonymous.id, settingsJSON: #"{"draft":true}"#))
        let reply = try await h.caller.call(
            IdentityAPI.signIn, SignInRequest(email: "ivy@example.com", password: strong, caller: caller, allowMigration: true))
        #expect(reply.migration?.oldUserID == anonymous.id)
        let changes = try await log(h)
        #expect(changes.count == 1)
        #expect(changes.first?.userID == anonymous.id && changes.first?.kinds == ["migrated"] && changes.first?.user == nil)
        #expect(h.tokens.revocations.map(\.reason) == ["migrated"])
        // An ordinary deletion of an anonymous user (the sweep, self-deletion) stays `deleted`.
        let other = try await h.caller.call(IdentityAPI.signInAnonymously, SignInAnonymouslyRequest()).user
        try await h.store.deleteAnonymous(id: UserID(other.id))
        #expect(try await log(h).last?.kinds == ["deleted"])
    }
}
