import Foundation

// The audit log (issue 22 §3; proto/common.proto): every security-relevant event, appended by the
// service that made the change in the same transaction as the change. The identity service keeps
// the users' events (sign-up, sign-in and its failures, credentials, email, verification,
// migration, deletion, administration), the token service the sessions' (sign-out, revocations,
// refresh token reuse). Each service numbers its own events; `gatehouse audit` merges the two logs
// by time. No event carries a secret: never a password, hash, code or token.

/// One event of an audit log: an item of `identity.listAudit` and `token.listAudit`.
public struct AuditEvent: Codable, Sendable, Hashable {
    /// The event's position in its service's log: increasing in commit order.
    public var seq: UInt64
    /// When it happened (the service's clock).
    public var occurredAt: Date
    /// What happened (`AuditEvent.Kind`), e.g. `sign_in.failed`.
    public var kind: String
    /// The user concerned; "" when none is known (a failed sign-in with an unknown address).
    public var userID: String
    /// Who did it: `user` (the user, through the public API), `operator` (an operator's tool with
    /// the service's own key), `system` (a background task of the service), or `admin_key:<id>`.
    public var actor: String
    /// Why: the stable error code of a failure (`invalid_credentials`, …), or the cause of a
    /// revocation (`user_deleted`, `signed_out_everywhere`, …); "" for none.
    public var reason: String
    /// The address concerned (the one tried at a failed sign-in, the new one of an email change);
    /// "" for none.
    public var email: String
    /// The client's address as the gateway saw it; "" when not known.
    public var ip: String
    /// The client's `User-Agent` (at most 512 bytes); "" when not known.
    public var userAgent: String
    /// The session concerned (token service events); "" for none.
    public var sessionID: String
    /// Further non-secret details as a small JSON object (e.g. the counts of an import); "" for none.
    public var detailJSON: String

    /// An event.
    public init(
        seq: UInt64 = 0, occurredAt: Date, kind: String, userID: String = "", actor: String = Actor.user, reason: String = "",
        email: String = "", ip: String = "", userAgent: String = "", sessionID: String = "", detailJSON: String = ""
    ) {
        self.seq = seq
        self.occurredAt = occurredAt
        self.kind = kind
        self.userID = userID
        self.actor = actor
        self.reason = reason
        self.email = email
        self.ip = ip
        self.userAgent = userAgent
        self.sessionID = sessionID
        self.detailJSON = detailJSON
    }

    enum CodingKeys: Int, CodingKey {
        case seq = 1, occurredAt = 2, kind = 3, userID = 4, actor = 5, reason = 6, email = 7, ip = 8, userAgent = 9
        case sessionID = 10, detailJSON = 11
    }

    /// Who can act.
    public enum Actor {
        /// The user, through the public API.
        public static let user = "user"
        /// An operator's tool calling with the service's own key (`gatehouse users …`).
        public static let `operator` = "operator"
        /// A background task of the service (the anonymous sweep).
        public static let system = "system"
        /// The admin API with the key `id`.
        public static func adminKey(_ id: String) -> String { "admin_key:\(id)" }
    }

    /// The kinds of event. A failure is its operation's kind with `.failed`, and its `reason`.
    public enum Kind {
        /// A user signed up with email and password.
        public static let signUp = "sign_up"
        /// An anonymous user was created.
        public static let signUpAnonymous = "sign_up.anonymous"
        /// A password sign-in succeeded.
        public static let signIn = "sign_in"
        /// A password sign-in was refused (`reason`: `invalid_credentials`, `user_disabled`,
        /// `email_not_verified`, `too_many_attempts`, …).
        public static let signInFailed = "sign_in.failed"
        /// A re-authentication (recent login) succeeded.
        public static let reauthenticate = "reauthenticate"
        /// A re-authentication was refused.
        public static let reauthenticateFailed = "reauthenticate.failed"
        /// An anonymous user set an email and password (same id).
        public static let anonymousUpgraded = "anonymous.upgraded"
        /// An anonymous user's sign-in into an existing account (the anonymous user is deleted).
        public static let migration = "migration"
        /// A migrating sign-in was refused.
        public static let migrationFailed = "migration.failed"
        /// The password was changed by its user.
        public static let passwordChanged = "password.changed"
        /// A password was set with a reset code.
        public static let passwordReset = "password_reset.completed"
        /// An email change was asked for (the code mailed to the new address in `email`).
        public static let emailChangeRequested = "email_change.requested"
        /// An email change was confirmed (the new address in `email`).
        public static let emailChanged = "email.changed"
        /// An email change was reverted from the old address (sessions revoked, password cleared).
        public static let emailChangeReverted = "email_change.reverted"
        /// The address was verified with a mailed code.
        public static let emailVerified = "email.verified"
        /// The user deleted their account.
        public static let accountDeleted = "account.deleted"
        /// An operator deleted the user.
        public static let userDeleted = "user.deleted"
        /// An operator disabled the user (sessions revoked).
        public static let userDisabled = "user.disabled"
        /// An operator enabled the user again.
        public static let userEnabled = "user.enabled"
        /// An operator set the user's custom claims.
        public static let claimsSet = "claims.set"
        /// An operator created a user (admin API).
        public static let userCreated = "user.created"
        /// An operator changed a user (admin API; `detailJSON.fields`: which).
        public static let userUpdated = "user.updated"
        /// An operator revoked every session of a user (admin API).
        public static let userSessionsRevoked = "user.sessions_revoked"
        /// An operator made a password-reset or verification link (`detailJSON.kind`), not mailed.
        public static let actionLinkGenerated = "action_link.generated"
        /// An admin API key was made (`detailJSON`: its id, name and scopes).
        public static let adminKeyCreated = "admin_key.created"
        /// An admin API key was revoked (`detailJSON.keyId`).
        public static let adminKeyRevoked = "admin_key.revoked"
        /// An operator imported a batch of users (`detailJSON`: the counts).
        public static let usersImported = "users.imported"
        /// A provider identity was linked to the user (`detailJSON.provider`; sign-in and sign-up
        /// with a provider carry it in `detailJSON` too).
        public static let providerLinked = "provider.linked"
        /// A provider identity was unlinked from the user (`detailJSON.provider`).
        public static let providerUnlinked = "provider.unlinked"
        /// A provider identity could not be linked or unlinked (`reason`: the error code).
        public static let providerLinkFailed = "provider.link_failed"
        /// The sweep deleted an inactive anonymous user.
        public static let anonymousSwept = "anonymous.swept"
        /// A session was signed out (token service).
        public static let sessionRevoked = "session.revoked"
        /// Every session of a user was revoked (token service; `reason` names why).
        public static let sessionsRevoked = "sessions.revoked"
        /// A refresh token was used again after its grace window: its session was revoked.
        public static let refreshTokenReused = "refresh_token.reused"
        /// A new signing key was made (token service; `detailJSON`: `kid`, `previousKid`,
        /// `activatesAt`); `reason` `scheduled` for the rotation `GATEHOUSE_SIGNING_KEY_ROTATION_DAYS` makes.
        public static let signingKeyRotated = "signing_key.rotated"
    }
}

/// `identity.listAudit` and `token.listAudit` request: a page of the service's audit log.
public struct ListAuditRequest: Codable, Sendable, Hashable {
    /// Events with a greater `seq` are listed (0: from the oldest kept).
    public var afterSeq: UInt64
    /// Only this user's events; "" for everyone's.
    public var userID: String
    /// At most this many (1 … `maxAuditPage`; 0: the maximum).
    public var limit: Int32
    /// Only events that happened at or after this time; nil for no bound.
    public var since: Date?

    /// The events after `afterSeq`, of `userID` ("" for all), at most `limit`, not before `since`.
    public init(afterSeq: UInt64 = 0, userID: String = "", limit: Int32 = 0, since: Date? = nil) {
        self.afterSeq = afterSeq
        self.userID = userID
        self.limit = limit
        self.since = since
    }

    enum CodingKeys: Int, CodingKey { case afterSeq = 1, userID = 2, limit = 3, since = 4 }
}

/// `identity.listAudit` and `token.listAudit` reply.
public struct ListAuditResponse: Codable, Sendable, Hashable {
    /// The events, in `seq` order.
    public var events: [AuditEvent]
    /// The position to ask after for the next page (the last listed or examined `seq`); the
    /// request's `afterSeq` when nothing newer exists.
    public var nextAfterSeq: UInt64

    /// A page of `events`, continued after `nextAfterSeq`.
    public init(events: [AuditEvent], nextAfterSeq: UInt64) {
        self.events = events
        self.nextAfterSeq = nextAfterSeq
    }

    enum CodingKeys: Int, CodingKey { case events = 1, nextAfterSeq = 2 }
}

/// The largest page of `identity.listAudit` and `token.listAudit`.
public let maxAuditPage: Int32 = 1_000

extension IdentityAPI {
    /// A page of the identity service's audit log (administrative: only the service's own key,
    /// i.e. `gatehouse audit`). Errors: `invalid_argument` (limit, user id). Idempotent.
    public static let listAudit = RPCMethod<ListAuditRequest, ListAuditResponse>(name: "identity.listAudit", idempotent: true)
}

extension TokenAPI {
    /// A page of the token service's audit log (administrative: the service's own key, and the
    /// identity service's, which `gatehouse audit` runs with to read both logs). Errors:
    /// `invalid_argument` (limit, user id). Idempotent.
    public static let listAudit = RPCMethod<ListAuditRequest, ListAuditResponse>(
        name: "token.listAudit", idempotent: true, callers: [.identity])
}
