import Crypto
import Foundation
import GatehouseContracts
import GatehouseSupport
import IdentityCore
import IdentityPorts
import Logging
import ProtoCodec
import RPCRouting

/// What every feature's handlers share: the token service, the event sink, the clock, the log,
/// the audit trail and the recent-login window. No storage port: each feature holds the ports it
/// uses itself.
public struct HandlerBasics: Sendable {
    /// Reaches the token service (`token.issueSession`, revocations).
    public var tokens: any RPCCaller
    /// Where `user.*` events go (best effort).
    public var events: any EventSink
    /// Stamps records and events.
    public var clock: WallClock
    /// Where failures a caller cannot see are logged.
    public var logger: Logger
    /// Writes each call's audit event.
    public var audit: AuditTrail
    /// How long after a sign-in credential changes are allowed without re-authenticating; 0: never.
    public var recentLoginWindow: TimeInterval
}

/// A feature's handlers (accounts, migration, providers, mail flows, admin, import, changes):
/// each a struct holding its `HandlerBasics` and only the storage ports and settings it uses. The
/// helpers every feature calls (audit, events, sessions, input checks) come from here.
protocol IdentityFeature: Sendable {
    var basics: HandlerBasics { get }
}

extension IdentityFeature {
    var tokens: any RPCCaller { basics.tokens }
    var events: any EventSink { basics.events }
    var clock: WallClock { basics.clock }
    var logger: Logger { basics.logger }

    // MARK: Audit

    /// `AuditTrail.audited`: `body` as the audited operation `kind`.
    func audited<T: Sendable>(
        _ kind: String, failure: String? = nil, actor: String = AuditEvent.Actor.user, userID: String = "",
        email: String = "", client: ClientInfo = ClientInfo(), sessionID: String = "",
        _ body: () async throws -> T
    ) async throws -> T {
        try await basics.audit.audited(
            kind, failure: failure, actor: actor, userID: userID, email: email, client: client, sessionID: sessionID, body)
    }

    /// Notes `user` as the one the running call's audit event is about.
    func auditUser(_ user: UserID) {
        AuditScope.current?.update { $0.userID = user.rawValue }
    }

    /// Notes the address the running call is about, once it parsed (normalized: never what a
    /// person typed into the wrong box).
    func auditEmail(_ email: EmailAddress) {
        AuditScope.current?.update { $0.email = email.normalized }
    }

    // MARK: Events

    func publish(_ topic: String, _ user: UserRecord) async {
        await publish(topic, UserEvent(userID: user.id.rawValue, version: user.version, occurredAt: user.updatedAt))
    }

    func publish(_ topic: String, _ event: UserEvent) async {
        do {
            await events.publish(topic: topic, payload: try ProtobufEncoder().encode(event))
        } catch {
            logger.warning("event \(topic) does not encode: \(error)")
        }
    }

    // MARK: Sessions

    /// Asks the token service for a session with what is left of the caller's `deadline` (the
    /// token client's default timeout without one).
    func issueSession(
        for user: UserRecord, at: Date, client: ClientInfo, amr: [String] = ["pwd"], deadline: ContinuousClock.Instant?
    ) async throws -> SessionTokens {
        let request = IssueSessionRequest(
            userID: user.id.rawValue, claims: user.claims, amr: amr, authTime: at, client: client)
        return try await tokens.call(ServiceContracts.issueSession, request, deadline: deadline)
    }

    /// Revokes every session of `id` in the token service (`token.revokeAllSessions`, idempotent).
    func revokeSessions(of id: UserID, reason: String) async throws {
        _ = try await tokens.call(TokenAPI.revokeAllSessions, UserSessionsRequest(userID: id.rawValue, reason: reason))
    }

    /// Revokes every session of `id` but `except` in the token service (committed before the
    /// reply); the ids of the sessions whose access tokens the gateway must refuse.
    func revokeSessionIDs(of id: UserID, reason: String, except: String?) async throws -> [String] {
        let request = UserSessionsRequest(userID: id.rawValue, reason: reason, exceptSessionID: except)
        return try await tokens.call(TokenAPI.revokeAllSessions, request).sessionIDs
    }

    /// Runs `write` (a new password) between two revocations of every session of `id` but
    /// `except`, each committed in the token service: a failure before the write changes nothing
    /// but revokes, and a session a racing sign-in made before the write is caught by the second
    /// (one made after it sees the new hash: `issueConfirmedSession`). Returns `write`'s result and
    /// the ids of both revocations, for the gateway. Once `write` is done the change happened:
    /// a failing second revocation is tried `secondRevocationAttempts` times, then logged as an
    /// error and the change answered as done with what the first revoked (never an error after
    /// the password changed, which a client would take for "nothing changed").
    func revokingSessions<T>(
        of id: UserID, reason: String, except: String? = nil, around write: () async throws -> T
    ) async throws -> (T, [String]) {
        var revoked = try await revokeSessionIDs(of: id, reason: reason, except: except)
        let result = try await write()
        for attempt in 1...secondRevocationAttempts {
            do {
                for session in try await revokeSessionIDs(of: id, reason: reason, except: except) where !revoked.contains(session) {
                    revoked.append(session)
                }
                break
            } catch {
                guard attempt < secondRevocationAttempts else {
                    logger.error(
                        "the second revocation of user \(id.rawValue)'s sessions (\(reason)) failed \(attempt) times after the change was written; a session a racing sign-in made before the write lives until it expires or is revoked: \(error)")
                    break
                }
                try? await Task.sleep(for: .milliseconds(50 * attempt * attempt))
            }
        }
        return (result, revoked)
    }

    /// The recent-login gate: `requires_recent_login` unless the caller authenticated (its
    /// session's `auth_time`) at most `recentLoginWindow` seconds ago. A window of 0 refuses always.
    func requireRecentLogin(_ caller: AuthenticatedCaller) throws {
        let window = basics.recentLoginWindow
        let age = clock.now.timeIntervalSince(caller.authTime)
        guard window > 0, age <= window else {
            throw IdentityError.requiresRecentLogin(windowSeconds: Int(window.rounded(.up)))
        }
    }
}

/// How often the revocation after a credential change is tried before the change is answered anyway.
let secondRevocationAttempts = 3

extension UserStore {
    /// The caller's stored user; `userNotFound` when it is gone.
    func callerUser(_ caller: AuthenticatedCaller) async throws -> UserRecord {
        guard let user = try await user(id: try IdentityInput.validCaller(caller)) else { throw IdentityError.userNotFound }
        return user
    }
}

/// The checks of a request's fields every feature shares (each throws `invalidArgument` naming
/// the field), and the one-time codes of the mail flows and admin keys.
enum IdentityInput {
    /// The longest display name, in characters.
    static let maxDisplayNameLength = 256
    /// The longest photo URL, in bytes.
    static let maxPhotoURLLength = 2048

    static func validID(_ text: String) throws -> UserID {
        guard UserID.isWellFormed(text) else {
            throw IdentityError.invalidArgument(field: "userID", reason: "not a user id")
        }
        return UserID(text)
    }

    /// The caller's user id, checked for shape (and its session id).
    static func validCaller(_ caller: AuthenticatedCaller) throws -> UserID {
        guard UserID.isWellFormed(caller.userID) else {
            throw IdentityError.invalidArgument(field: "caller.userID", reason: "not a user id")
        }
        guard !caller.sessionID.isEmpty, caller.sessionID.utf8.count <= 64 else {
            throw IdentityError.invalidArgument(field: "caller.sessionID", reason: "must be 1 to 64 bytes")
        }
        return UserID(caller.userID)
    }

    /// nil stays nil; "" (after trimming) becomes nil: no name.
    static func validDisplayName(_ name: String?) throws -> String? {
        guard let name else { return nil }
        guard name.utf8.count <= maxDisplayNameLength * 4 else {
            throw IdentityError.invalidArgument(field: "displayName", reason: "longer than \(maxDisplayNameLength) characters")
        }
        let trimmed = name.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.unicodeScalars.count <= maxDisplayNameLength else {
            throw IdentityError.invalidArgument(field: "displayName", reason: "longer than \(maxDisplayNameLength) characters")
        }
        guard !trimmed.unicodeScalars.contains(where: { $0.properties.generalCategory == .control || $0 == "\u{FFFD}" }) else {
            throw IdentityError.invalidArgument(field: "displayName", reason: "contains a control character")
        }
        return trimmed.isEmpty ? nil : trimmed
    }

    /// The gateway truncates the user agent to 512 bytes; an IP address is at most 45 characters.
    static func checkClient(_ client: ClientInfo) throws {
        guard client.userAgent.utf8.count <= 512 else {
            throw IdentityError.invalidArgument(field: "client.userAgent", reason: "longer than 512 bytes")
        }
        guard client.ip.utf8.count <= 45, client.ip.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw IdentityError.invalidArgument(field: "client.ip", reason: "not an IP address")
        }
    }

    static func validPhotoURL(_ text: String) throws -> String? {
        if text.isEmpty { return nil }
        let invalid = IdentityError.invalidArgument(field: "photoURL", reason: "must be an http(s) URL of at most \(maxPhotoURLLength) characters")
        guard text.utf8.count <= maxPhotoURLLength,
            !text.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F || $0 == "\u{FFFD}" }),
            let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty
        else { throw invalid }
        return text
    }

    /// A replacing settings document, checked by the rules a later merge patch reads it with
    /// (`SettingsDocument.validated`: `JSONTree`'s grammar and nesting limit, 16 KiB).
    static func validSettings(_ text: String) throws -> String {
        try SettingsDocument.validated(text, field: "settingsJSON")
    }

    /// The checked merge patch of `updateProfile` (nil when none), read before the store is
    /// touched; refused together with a replacing `settingsJSON`.
    static func validSettingsPatch(_ text: String?, replacing settings: String?) throws -> JSONTree? {
        guard let text else { return nil }
        guard settings == nil else {
            throw IdentityError.invalidArgument(field: "settingsPatchJSON", reason: "give either settingsJSON or settingsPatchJSON, not both")
        }
        return try SettingsDocument.patch(text)
    }

    /// `invalidArgument` for a locale list over 64 bytes.
    static func checkLocale(_ locale: String) throws {
        guard locale.utf8.count <= 64 else { throw IdentityError.invalidArgument(field: "locale", reason: "longer than 64 bytes") }
    }

    /// The mail language preference list, checked for length (`invalidArgument` past 64 bytes).
    static func emailChangeLocale(_ locale: String) throws -> String {
        try checkLocale(locale)
        return locale.isEmpty ? "en" : locale
    }

    /// When the password hash must be done for a call that must answer by `deadline`: a tenth of
    /// the time left (at most 100 ms) stays for what follows it (a write and the session).
    static func hashDeadline(_ deadline: ContinuousClock.Instant?, now: ContinuousClock.Instant = .now) -> ContinuousClock.Instant? {
        guard let deadline else { return nil }
        return deadline - max(.zero, min(.milliseconds(100), (deadline - now) / 10))
    }

    /// `date` when it is within the years 1970 to 9999 (stored as milliseconds); `invalidArgument` otherwise.
    static func auditableDate(_ date: Date?, _ field: String) throws -> Date? {
        guard let date else { return nil }
        guard date.timeIntervalSince1970 >= 0, date.timeIntervalSince1970 < 253_402_300_800 else {
            throw IdentityError.invalidArgument(field: field, reason: "must be a time between 1970 and 9999")
        }
        return date
    }

    // MARK: One-time codes

    /// A new code: 32 random bytes, base64url without padding (43 characters).
    static func newResetCode() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<4).flatMap { _ in withUnsafeBytes(of: generator.next() as UInt64) { Array($0) } }
        return Base64URL.encode(bytes)
    }

    /// The stored form of a code: its SHA-256.
    static func resetCodeHash(_ code: String) -> Data {
        Data(SHA256.hash(data: Data(code.utf8)))
    }

    /// The hash of `code` when it has the form of one (43 base64url characters, 32 bytes), else nil.
    static func resetCodeHash(ifWellFormed code: String) -> Data? {
        guard code.utf8.count == 43, let bytes = Base64URL.decodeBytes(code), bytes.count == 32 else { return nil }
        return resetCodeHash(code)
    }
}

/// Setting a password: the policy it must satisfy and the pool that hashes it (sign-up, upgrade,
/// change, reset, the admin API; and the sign-in's check and rehash).
public struct NewPasswords: Sendable {
    /// Hashes and verifies passwords on the hash pool.
    public let hasher: PasswordHasher
    /// What a new password must satisfy.
    public let policy: PasswordPolicy

    /// `typed` checked by the policy (`weakPassword` with its reasons) for the account `email`
    /// (normalized), then hashed, done by what is left of `deadline` (`IdentityInput.hashDeadline`).
    func hash(_ typed: String, email: String, deadline: ContinuousClock.Instant?) async throws -> String {
        try await hasher.hash(try policy.validate(typed, email: email), deadline: IdentityInput.hashDeadline(deadline))
    }
}

/// What the mail flows are made with: the templates and their composer, the password reset's and
/// the email flows' settings (lifetimes, per-address limits).
public struct MailParts: Sendable {
    /// Builds every mail and link.
    public let composer: MailComposer
    /// The templates (built in unless the operator's files override them), for their locales.
    public let templates: MailTemplates
    /// Password reset: code lifetime, per-address mail limits.
    public let passwordReset: PasswordResetSettings
    /// Email verification and change: mode, code lifetimes, per-user mail limits.
    public let emailFlows: EmailFlowSettings
}
