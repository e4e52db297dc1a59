import Foundation
import IdentityPorts
import GatehouseContracts
import GatehouseTestSupport
import IdentityCore
import IdentityService
import RPCRouting
import Synchronization
import Testing
import SQLiteStores

/// Upgrade in place, and migration of an anonymous user to an existing account
/// (`identity.upgradeAnonymous`, `identity.signIn` with a caller, `identity.resumeSignIn`).
@Suite struct MigrationHandlersTests {
    let strong = "glacier lantern marmalade"

    /// A new anonymous user and its caller (the fake token service names every session `sid-1`).
    func anonymous(_ h: Harness, session: String = "sid-1") async throws -> (user: User, caller: AuthenticatedCaller) {
        let reply = try await h.caller.call(IdentityAPI.signInAnonymously, SignInAnonymouslyRequest())
        return (reply.user, AuthenticatedCaller(userID: reply.user.id, sessionID: session, authTime: h.clock.now))
    }

    /// Signs up `email` (the existing account B).
    func existing(_ h: Harness, _ email: String = "bea@example.com") async throws -> User {
        try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: email, password: strong)).user
    }

    /// The `migration_required` details of a sign-in by `caller` to `email` without a decision.
    func migrationRequired(_ h: Harness, _ caller: AuthenticatedCaller, _ email: String = "bea@example.com") async throws -> [String: String] {
        do {
            _ = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: email, password: strong, caller: caller))
            Issue.record("signed in without a decision")
            return [:]
        } catch let error as RPCError {
            #expect(error.code == .migrationRequired, "\(error)")
            return error.details
        }
    }

    // MARK: Upgrade

    @Test("A15: an upgrade keeps the id, ends anonymity, sets providers [password] and issues a password session")
    func upgradeKeepsTheID() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        let (a, caller) = try await anonymous(h)
        let reply = try await h.caller.call(
            IdentityAPI.upgradeAnonymous, UpgradeAnonymousRequest(caller: caller, email: "Ann@Example.com", password: strong, displayName: "Ann"))
        #expect(reply.user.id == a.id)
        #expect(!reply.user.isAnonymous)
        #expect(reply.user.email == "Ann@Example.com")
        #expect(reply.user.providers == ["password"])
        #expect(reply.user.displayName == "Ann")
        #expect(reply.migration == nil)
        let issued = try #require(h.tokens.requests.last)
        #expect(issued.userID == a.id && issued.amr == ["pwd"] && issued.authTime == h.clock.now)
        #expect(issued.claims.email == "Ann@Example.com" && issued.claims.isAnonymous == false)
        #expect(h.events.topics.last == "user.updated")
        #expect(h.tokens.revocations.isEmpty)
        // The new credentials sign in to the same user.
        let signedIn = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "ann@example.com", password: strong))
        #expect(signedIn.user.id == a.id)
    }

    @Test("an upgrade to a taken email answers email_exists and changes nothing; bad input is refused first")
    func upgradeErrors() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        _ = try await existing(h)
        let (a, caller) = try await anonymous(h)
        await expectCode(.emailExists) {
            try await h.caller.call(IdentityAPI.upgradeAnonymous, UpgradeAnonymousRequest(caller: caller, email: "BEA@example.com", password: strong))
        }
        await expectCode(.weakPassword) {
            try await h.caller.call(IdentityAPI.upgradeAnonymous, UpgradeAnonymousRequest(caller: caller, email: "new@example.com", password: "abc"))
        }
        await expectCode(.invalidEmail) {
            try await h.caller.call(IdentityAPI.upgradeAnonymous, UpgradeAnonymousRequest(caller: caller, email: "not-an-email", password: strong))
        }
        let stored = try #require(try await h.store.user(id: UserID(a.id)))
        #expect(stored.isAnonymous && stored.email == nil && stored.passwordHash == nil && stored.version == a.version)
        // A user who is not anonymous is told where to go instead.
        let b = try await existing(h, "cal@example.com")
        let bCaller = AuthenticatedCaller(userID: b.id, sessionID: "sid-1", authTime: h.clock.now)
        do {
            _ = try await h.caller.call(IdentityAPI.upgradeAnonymous, UpgradeAnonymousRequest(caller: bCaller, email: "x@example.com", password: strong))
            Issue.record("upgraded a user who is not anonymous")
        } catch let error as RPCError {
            #expect(error.code == .invalidArgument)
            #expect(error.message.contains("/v1/me/email"))
        }
    }

    // MARK: Sign-in while anonymous

    @Test("A23: an unknown email answers user_not_found to an anonymous caller, counted by the throttle like any sign-in")
    func unknownEmailWhileAnonymous() async throws {
        let h = try await Harness(throttle: PasswordAttemptThrottle.Settings(threshold: 2))
        defer { h.cleanup() }
        let (a, caller) = try await anonymous(h)
        for _ in 0..<2 {
            await expectCode(.userNotFound) {
                try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "nobody@example.com", password: strong, caller: caller))
            }
        }
        await expectCode(.tooManyAttempts) {
            try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "nobody@example.com", password: strong, caller: caller))
        }
        // Without the caller, the same email is the usual indistinguishable answer.
        let other = try await Harness()
        defer { other.cleanup() }
        await expectCode(.invalidCredentials) {
            try await other.caller.call(IdentityAPI.signIn, SignInRequest(email: "nobody@example.com", password: strong))
        }
        #expect(try await h.store.user(id: UserID(a.id))?.isAnonymous == true)
    }

    @Test("A20: a wrong password answers invalid_credentials and leaves A and its sessions alone, even with allowMigration")
    func wrongPasswordKeepsA() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        let b = try await existing(h)
        let (a, caller) = try await anonymous(h)
        await expectCode(.invalidCredentials) {
            try await h.caller.call(
                IdentityAPI.signIn, SignInRequest(email: "bea@example.com", password: "wrong password!", caller: caller, allowMigration: true))
        }
        #expect(try await h.store.user(id: UserID(a.id)) != nil)
        #expect(try await h.store.user(id: UserID(b.id))?.version == b.version)
        #expect(h.tokens.revocations.isEmpty)
        #expect(!h.events.topics.contains("user.deleted"))
    }

    @Test("A17: valid credentials without a decision answer migration_required with both ids and a handle; nothing is deleted")
    func migrationRequiredKeepsA() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        let b = try await existing(h)
        let (a, caller) = try await anonymous(h)
        let details = try await migrationRequired(h, caller)
        #expect(details["anonymousUserId"] == a.id)
        #expect(details["existingUserId"] == b.id)
        #expect(details["resumeHandleExpiresIn"] == "300")
        let handle = try #require(details["resumeHandle"])
        #expect(handle.count == 43)  // 32 bytes, base64url without padding
        #expect(try await h.store.user(id: UserID(a.id)) != nil)
        #expect(h.tokens.revocations.isEmpty)
        #expect(h.handlers.resumeHandles.count == 1)
    }

    @Test("A18: allowMigration true deletes A through the delete path, then signs in to B and reports the migration", arguments: StoreKind.kept)
    func migrateUpFront(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let b = try await existing(h)
        let (a, caller) = try await anonymous(h)
        let reply = try await h.caller.call(
            IdentityAPI.signIn, SignInRequest(email: "bea@example.com", password: strong, caller: caller, allowMigration: true))
        #expect(reply.user.id == b.id)
        #expect(reply.migration == MigrationOutcome(oldUserID: a.id, newUserID: b.id, performMigration: true))
        #expect(try await h.store.user(id: UserID(a.id)) == nil)
        #expect(h.tokens.revocations.map(\.userID) == [a.id])
        #expect(h.tokens.revocations.first?.reason == "migrated")
        let issued = try #require(h.tokens.requests.last)
        #expect(issued.userID == b.id && issued.amr == ["pwd"])
        #expect(h.events.topics.last == "user.deleted")
        #expect(try h.events.decoded().last?.event.userID == a.id)
    }

    @Test("A19: resume with allowMigration false from the session that got the handle: A deleted, performMigration false; the handle works once", arguments: StoreKind.kept)
    func resumeOnce(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let b = try await existing(h)
        let (a, caller) = try await anonymous(h)
        let handle = try #require(try await migrationRequired(h, caller)["resumeHandle"])
        // Another session of A, another user, a made-up handle: refused, and the handle stays.
        for other in [
            AuthenticatedCaller(userID: a.id, sessionID: "sid-2", authTime: h.clock.now),
            AuthenticatedCaller(userID: b.id, sessionID: "sid-1", authTime: h.clock.now),
        ] {
            await expectCode(.invalidResumeHandle) {
                try await h.caller.call(IdentityAPI.resumeSignIn, ResumeSignInRequest(caller: other, resumeHandle: handle, allowMigration: true))
            }
        }
        await expectCode(.invalidResumeHandle) {
            try await h.caller.call(IdentityAPI.resumeSignIn, ResumeSignInRequest(caller: caller, resumeHandle: "made-up", allowMigration: true))
        }
        #expect(try await h.store.user(id: UserID(a.id)) != nil)
        let reply = try await h.caller.call(IdentityAPI.resumeSignIn, ResumeSignInRequest(caller: caller, resumeHandle: handle, allowMigration: false))
        #expect(reply.user.id == b.id)
        #expect(reply.migration == MigrationOutcome(oldUserID: a.id, newUserID: b.id, performMigration: false))
        #expect(try await h.store.user(id: UserID(a.id)) == nil)
        await expectCode(.invalidResumeHandle) {
            try await h.caller.call(IdentityAPI.resumeSignIn, ResumeSignInRequest(caller: caller, resumeHandle: handle, allowMigration: false))
        }
    }

    @Test("a resume handle expires after its TTL (the clock moved past it)")
    func resumeHandleExpires() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        _ = try await existing(h)
        let (a, caller) = try await anonymous(h)
        let handle = try #require(try await migrationRequired(h, caller)["resumeHandle"])
        h.clock.advance(by: 300)
        await expectCode(.invalidResumeHandle) {
            try await h.caller.call(IdentityAPI.resumeSignIn, ResumeSignInRequest(caller: caller, resumeHandle: handle, allowMigration: true))
        }
        #expect(try await h.store.user(id: UserID(a.id)) != nil)
        #expect(h.handlers.resumeHandles.count == 0)
    }

    @Test("two concurrent resumes of one handle: exactly one succeeds, the other answers invalid_resume_handle", arguments: StoreKind.kept)
    func concurrentResumes(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        _ = try await existing(h)
        let (_, caller) = try await anonymous(h)
        let handle = try #require(try await migrationRequired(h, caller)["resumeHandle"])
        let request = ResumeSignInRequest(caller: caller, resumeHandle: handle, allowMigration: true)
        let identity = h.caller
        let outcomes = await withTaskGroup(of: ErrorCode?.self) { group in
            for _ in 0..<2 {
                group.addTask {
                    do {
                        _ = try await identity.call(IdentityAPI.resumeSignIn, request)
                        return nil
                    } catch let error as RPCError {
                        return error.code
                    } catch {
                        return .internal
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.filter { $0 == nil }.count == 1)
        #expect(outcomes.compactMap { $0 } == [.invalidResumeHandle])
        #expect(h.tokens.revocations.count == 1)
    }

    @Test("a disabled target answers user_disabled and deletes nothing, up front or at resume", arguments: StoreKind.kept)
    func disabledTarget(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let b = try await existing(h)
        let (a, caller) = try await anonymous(h)
        let handle = try #require(try await migrationRequired(h, caller)["resumeHandle"])
        _ = try await h.caller.call(IdentityAPI.setDisabled, SetDisabledRequest(userID: b.id, disabled: true))
        await expectCode(.userDisabled) {
            try await h.caller.call(IdentityAPI.resumeSignIn, ResumeSignInRequest(caller: caller, resumeHandle: handle, allowMigration: true))
        }
        await expectCode(.userDisabled) {
            try await h.caller.call(
                IdentityAPI.signIn, SignInRequest(email: "bea@example.com", password: strong, caller: caller, allowMigration: true))
        }
        #expect(try await h.store.user(id: UserID(a.id)) != nil)
        #expect(h.tokens.revocations.map(\.userID) == [b.id])  // disabling B revoked B's sessions, nobody else's
    }

    @Test("a resume after A was upgraded meanwhile is refused; a caller that is not anonymous signs in as usual", arguments: StoreKind.kept)
    func callerNoLongerAnonymous(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let b = try await existing(h)
        let (a, caller) = try await anonymous(h)
        let handle = try #require(try await migrationRequired(h, caller)["resumeHandle"])
        _ = try await h.caller.call(IdentityAPI.upgradeAnonymous, UpgradeAnonymousRequest(caller: caller, email: "ann@example.com", password: strong))
        await expectCode(.invalidResumeHandle) {
            try await h.caller.call(IdentityAPI.resumeSignIn, ResumeSignInRequest(caller: caller, resumeHandle: handle, allowMigration: true))
        }
        // A is an ordinary user now: its sign-in to B is an ordinary one, A stays.
        let reply = try await h.caller.call(
            IdentityAPI.signIn, SignInRequest(email: "bea@example.com", password: strong, caller: caller, allowMigration: true))
        #expect(reply.user.id == b.id && reply.migration == nil)
        #expect(try await h.store.user(id: UserID(a.id)) != nil)
        await expectCode(.invalidCredentials) {
            try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "nobody@example.com", password: strong, caller: caller))
        }
    }

    @Test("B's session is asked for only once A's deletion and the revocation of its sessions are done")
    func deletionIsCommittedFirst() async throws {
        let dir = try TemporaryDirectory(prefix: "identity-tests")
        defer { dir.remove() }
        let store = try await dir.migratedStore()
        let revoked = Mutex<[String]>([])
        let seenAtIssue = Mutex<[(user: String, aExists: Bool, revoked: [String])]>([])
        let anonymousID = Mutex<String>("")
        var tokens = RPCRouter()
        tokens.register(ServiceContracts.issueSession) { request, _ in
            let a = anonymousID.withLock { $0 }
            var exists = false
            if !a.isEmpty { exists = try await store.user(id: UserID(a)) != nil }
            seenAtIssue.withLock { $0.append((request.userID, exists, revoked.withLock { $0 })) }
            return SessionTokens(accessToken: "at", refreshToken: "rt", expiresIn: 900, sessionID: "sid-\(request.userID)")
        }
        tokens.register(TokenAPI.revokeAllSessions) { request, _ in
            revoked.withLock { $0.append(request.userID) }
            return RevokedCount(count: 1, sessionIDs: ["sid-\(request.userID)"])
        }
        let handlers = IdentityHandlers(
            store: store, hasher: PasswordHasher(parameters: .testing, pool: HashPool(workers: 1, queueLimit: 8)), policy: PasswordPolicy(),
            tokens: LocalCaller(router: tokens))
        let caller = LocalCaller(router: handlers.router())
        let b = try await caller.call(IdentityAPI.signUp, SignUpRequest(email: "bea@example.com", password: strong)).user
        let a = try await caller.call(IdentityAPI.signInAnonymously, SignInAnonymouslyRequest()).user
        anonymousID.withLock { $0 = a.id }
        let reply = try await caller.call(
            IdentityAPI.signIn,
            SignInRequest(
                email: "bea@example.com", password: strong, caller: AuthenticatedCaller(userID: a.id, sessionID: "sid-\(a.id)", authTime: Date()),
                allowMigration: true))
        let last = try #require(seenAtIssue.withLock { $0.last })
        #expect(last.user == b.id && !last.aExists && last.revoked == [a.id])
        #expect(reply.migration?.revokedSessionIDs == ["sid-\(a.id)"])
    }
}

/// A store that upgrades the anonymous user (gives it an email) just before a migration deletes
/// it: the race of an upgrade and a migrating sign-in of the same user, made deterministic.
final class UpgradingBeforeDeleteStore: ForwardingIdentityStorage, @unchecked Sendable {
    override func deleteMigratedAnonymous(id: UserID) async throws {
        let email = try EmailAddress("upgraded@example.com")
        _ = try await inner.update(id: id, expectedVersion: nil, now: Date()) { user in
            user.email = email.typed
            user.emailNormalized = email.normalized
            user.passwordHash = "$argon2id$v=19$m=8,t=1,p=1$c2FsdHNhbHQ$aGFzaA"
            user.isAnonymous = false
        }
        try await inner.deleteMigratedAnonymous(id: id)
    }
}

@Suite struct MigrationRaceTests {
    let strong = "glacier lantern marmalade"

    @Test("deleteAnonymous deletes only an anonymous user, in every store", arguments: StoreKind.allCases + [.postgres])
    func deleteAnonymousKeepsOthers(kind: StoreKind) async throws {
        let (store, cleanup) = try await kind.make()
        defer { cleanup() }
        let registered = try makeUser("reg@example.com")
        let anonymous = UserRecord(id: .random(), email: nil, isAnonymous: true, createdAt: t0)
        try await store.insert(registered)
        try await store.insert(anonymous)
        await expectCode(.userNotFound) { try await store.deleteAnonymous(id: registered.id) }
        #expect(try await store.user(id: registered.id) != nil)
        try await store.deleteAnonymous(id: anonymous.id)
        #expect(try await store.user(id: anonymous.id) == nil)
        await expectCode(.userNotFound) { try await store.deleteAnonymous(id: anonymous.id) }
    }

    @Test("a user upgraded while its migrating sign-in runs is kept: the sign-in becomes an ordinary one, a resume is refused", arguments: StoreKind.kept, [true, false])
    func upgradedMeanwhileIsKept(kind: StoreKind, resume: Bool) async throws {
        let (inner, cleanup) = try await kind.make()
        defer { cleanup() }
        let tokens = FakeTokenService()
        let handlers = IdentityHandlers(
            store: UpgradingBeforeDeleteStore(inner), hasher: PasswordHasher(parameters: .testing, pool: HashPool(workers: 1, queueLimit: 8)),
            policy: PasswordPolicy(), tokens: tokens.caller)
        let identity = LocalCaller(router: handlers.router())
        let b = try await identity.call(IdentityAPI.signUp, SignUpRequest(email: "bea@example.com", password: strong)).user
        let a = try await identity.call(IdentityAPI.signInAnonymously, SignInAnonymouslyRequest()).user
        let caller = AuthenticatedCaller(userID: a.id, sessionID: "sid-1", authTime: Date())
        if resume {
            var handle = ""
            do {
                _ = try await identity.call(IdentityAPI.signIn, SignInRequest(email: "bea@example.com", password: strong, caller: caller))
            } catch let error as RPCError { handle = error.details["resumeHandle"] ?? "" }
            await expectCode(.invalidResumeHandle) {
                try await identity.call(IdentityAPI.resumeSignIn, ResumeSignInRequest(caller: caller, resumeHandle: handle, allowMigration: true))
            }
        } else {
            let reply = try await identity.call(
                IdentityAPI.signIn, SignInRequest(email: "bea@example.com", password: strong, caller: caller, allowMigration: true))
            #expect(reply.user.id == b.id && reply.migration == nil)
        }
        #expect(try await inner.user(id: UserID(a.id))?.email == "upgraded@example.com")
        #expect(tokens.revocations.isEmpty)
    }
}

/// The resume-handle table on its own.
@Suite struct ResumeHandlesTests {
    let target = UserRecord(id: UserID("BBBBBBBBBBBBBBBBBBBBBB"), email: nil, passwordHash: "$argon2id$x", createdAt: Date(timeIntervalSince1970: 0))
    let now = Date(timeIntervalSince1970: 1_750_000_000)

    @Test("a handle is bound to its user and session, single use, and expires")
    func binding() {
        let handles = ResumeHandles(ttl: 60)
        let a = UserID("AAAAAAAAAAAAAAAAAAAAAA")
        let handle = handles.issue(anonymousUserID: a, sessionID: "s1", target: target, now: now)
        #expect(handles.take(handle, userID: a, sessionID: "s2", now: now) == nil)
        #expect(handles.take(handle, userID: UserID("CCCCCCCCCCCCCCCCCCCCCC"), sessionID: "s1", now: now) == nil)
        let entry = handles.take(handle, userID: a, sessionID: "s1", now: now + 59)
        #expect(entry?.targetUserID == target.id && entry?.targetPasswordHash == "$argon2id$x")
        #expect(handles.take(handle, userID: a, sessionID: "s1", now: now) == nil)
        let late = handles.issue(anonymousUserID: a, sessionID: "s1", target: target, now: now)
        #expect(handles.take(late, userID: a, sessionID: "s1", now: now + 60) == nil)
        #expect(handles.count == 0)
        #expect(handles.take("", userID: a, sessionID: "s1", now: now) == nil)
        #expect(handles.take(String(repeating: "x", count: 10_000), userID: a, sessionID: "s1", now: now) == nil)
    }

    @Test("the table is bounded: expired handles go first, then the oldest")
    func bounded() {
        let handles = ResumeHandles(ttl: 60, capacity: 16)
        let a = UserID("AAAAAAAAAAAAAAAAAAAAAA")
        for i in 0..<16 { _ = handles.issue(anonymousUserID: a, sessionID: "old-\(i)", target: target, now: now) }
        #expect(handles.count == 16)
        let fresh = handles.issue(anonymousUserID: a, sessionID: "s", target: target, now: now + 61)
        #expect(handles.count == 1)
        var issued = [fresh]
        for i in 0..<20 { issued.append(handles.issue(anonymousUserID: a, sessionID: "s\(i)", target: target, now: now + 62 + Double(i))) }
        #expect(handles.count <= 16)
        // The newest still works.
        #expect(handles.take(issued.last!, userID: a, sessionID: "s19", now: now + 90) != nil)
    }
}
