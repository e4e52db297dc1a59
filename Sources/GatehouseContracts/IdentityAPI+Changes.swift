import Foundation

// The change log of users (issue 21; proto/identity.proto): what `GET /v1/me/events` streams.
// The identity service records every committed change of a user in the same transaction as the
// change, numbers it (`seq`, one global sequence, so ids of one user increase), publishes it as
// `user.changed`, and serves it again from the log to a gateway that missed some or a client
// that resumes.

/// One committed change of a user, as the change log keeps it: the `user.changed` event, and an
/// item of `identity.listChanges` and `identity.userChanges`.
public struct UserChange: Codable, Sendable, Hashable {
    /// The change's position in the log: 1, 2, 3, … in commit order over all users (a user's own
    /// changes have increasing, not consecutive, numbers). The SSE event id.
    public var seq: UInt64
    /// The user.
    public var userID: String
    /// What changed, sorted (`UserChange.Kind`): `profile`, `settings`, `email`,
    /// `email_verified`, `providers`, `upgraded`, `claims`, `disabled`, `enabled`; or alone the
    /// terminal `deleted` or `migrated`.
    public var kinds: [String]
    /// When the change was committed (the user's `updatedAt`).
    public var occurredAt: Date
    /// The user after the change; nil for `deleted` and `migrated`.
    public var user: User?

    /// Change `seq` of `userID`.
    public init(seq: UInt64, userID: String, kinds: [String], occurredAt: Date, user: User? = nil) {
        self.seq = seq
        self.userID = userID
        self.kinds = kinds
        self.occurredAt = occurredAt
        self.user = user
    }

    enum CodingKeys: Int, CodingKey { case seq = 1, userID = 2, kinds = 3, occurredAt = 4, user = 5 }

    /// The kinds of change.
    public enum Kind {
        /// `displayName` or `photoURL`.
        public static let profile = "profile"
        /// The settings document.
        public static let settings = "settings"
        /// The email address.
        public static let email = "email"
        /// Whether the address is verified.
        public static let emailVerified = "email_verified"
        /// The linked providers (`password` included: a password set or cleared).
        public static let providers = "providers"
        /// An anonymous user became a regular one (same id).
        public static let upgraded = "upgraded"
        /// The custom claims (they reach access tokens at the next refresh).
        public static let claims = "claims"
        /// The user was disabled (terminal for a stream).
        public static let disabled = "disabled"
        /// The user was enabled again.
        public static let enabled = "enabled"
        /// The user was deleted (terminal; alone, no `user`).
        public static let deleted = "deleted"
        /// An anonymous user was deleted by a migration to an existing account (terminal; alone).
        public static let migrated = "migrated"
        /// Kinds after which a stream of the user ends.
        public static let terminal: Set<String> = [disabled, deleted, migrated]
    }
}

/// `user.changed` events carry a `UserChange`; `identity.heartbeat` (every
/// `GATEHOUSE_CHANGE_FEED_HEARTBEAT_MS`) the newest published position, so a subscriber that lost
/// the last events, or whose publisher's log went back (a restored database), finds out.
public struct ChangeFeedHeartbeat: Codable, Sendable, Hashable {
    /// The `seq` of the newest published change (0: none yet).
    public var seq: UInt64

    /// A heartbeat at position `seq`.
    public init(seq: UInt64) { self.seq = seq }

    enum CodingKeys: Int, CodingKey { case seq = 1 }
}

/// `identity.listChanges` request: the changes of every user after `afterSeq`.
public struct ListChangesRequest: Codable, Sendable, Hashable {
    /// Changes with a greater `seq` are listed.
    public var afterSeq: UInt64
    /// At most this many (1 … `IdentityAPI.maxChangesPage`; 0: the maximum).
    public var limit: Int32

    /// The changes after `afterSeq`, at most `limit`.
    public init(afterSeq: UInt64, limit: Int32 = 0) {
        self.afterSeq = afterSeq
        self.limit = limit
    }

    enum CodingKeys: Int, CodingKey { case afterSeq = 1, limit = 2 }
}

/// `identity.listChanges` reply.
public struct ListChangesResponse: Codable, Sendable, Hashable {
    /// The changes after the request's `afterSeq`, in order.
    public var changes: [UserChange]
    /// The newest `seq` in the log when it was read (0: empty); more follow when it is past the
    /// last listed change.
    public var head: UInt64
    /// Changes after `afterSeq` were pruned by retention (of any user), or the per-user cap pruned
    /// some of more users than `resyncUserIDs` holds: the caller cannot catch up from the log.
    public var truncated: Bool
    /// Users some of whose changes after `afterSeq` the per-user cap pruned (at most
    /// `IdentityAPI.maxChangesPage`): their streams must start again from a snapshot; the other
    /// users' changes are complete.
    public var resyncUserIDs: [String]

    /// A page of `changes` read at `head`.
    public init(changes: [UserChange], head: UInt64, truncated: Bool = false, resyncUserIDs: [String] = []) {
        self.changes = changes
        self.head = head
        self.truncated = truncated
        self.resyncUserIDs = resyncUserIDs
    }

    enum CodingKeys: Int, CodingKey { case changes = 1, head = 2, truncated = 3, resyncUserIDs = 4 }
}

/// `identity.userChanges` request: a snapshot of a user, or the user's changes after a position.
public struct UserChangesRequest: Codable, Sendable, Hashable {
    /// The user.
    public var userID: String
    /// false: a snapshot; true: the changes after `afterSeq` (a snapshot with `resync` when some
    /// of them are no longer in the log, or there are more than `limit`).
    public var resume: Bool
    /// With `resume`: the last change the caller has (the stream's `Last-Event-ID`).
    public var afterSeq: UInt64
    /// At most this many changes (1 … `IdentityAPI.maxChangesPage`; 0: the maximum).
    public var limit: Int32

    /// A snapshot of `userID` (`resume` false), or its changes after `afterSeq`.
    public init(userID: String, resume: Bool = false, afterSeq: UInt64 = 0, limit: Int32 = 0) {
        self.userID = userID
        self.resume = resume
        self.afterSeq = afterSeq
        self.limit = limit
    }

    enum CodingKeys: Int, CodingKey { case userID = 1, resume = 2, afterSeq = 3, limit = 4 }
}

/// `identity.userChanges` reply, read in one transaction.
public struct UserChangesResponse: Codable, Sendable, Hashable {
    /// The user now: for a snapshot (no `resume`, or `resync`); nil otherwise.
    public var user: User?
    /// The newest `seq` in the log when it was read (0: empty): a snapshot's position (its SSE id).
    public var head: UInt64
    /// With `resume` and no `resync`: the user's changes after `afterSeq`, in order (terminal
    /// ones included).
    public var changes: [UserChange]
    /// The resumed position is too old (changes were pruned), in the future (the log went back), or
    /// too many changes follow it: `user` is a fresh snapshot instead of `changes`.
    public var resync: Bool

    /// A reply read at `head`.
    public init(user: User? = nil, head: UInt64, changes: [UserChange] = [], resync: Bool = false) {
        self.user = user
        self.head = head
        self.changes = changes
        self.resync = resync
    }

    enum CodingKeys: Int, CodingKey { case user = 1, head = 2, changes = 3, resync = 4 }
}

extension IdentityAPI {
    /// The most changes one `listChanges` or `userChanges` reply carries.
    public static let maxChangesPage: Int32 = 1000

    /// Every user's changes after a position, for a gateway that found a gap in `user.changed`
    /// (or restarted). Errors: `invalid_argument` (limit). Idempotent.
    public static let listChanges = RPCMethod<ListChangesRequest, ListChangesResponse>(
        name: "identity.listChanges", idempotent: true, callers: [.gateway])
    /// A user's snapshot, or its changes after a position (`GET /v1/me/events`, `Last-Event-ID`).
    /// Errors: `invalid_argument`, `user_not_found` (no such user, and no terminal change to
    /// replay). Idempotent.
    public static let userChanges = RPCMethod<UserChangesRequest, UserChangesResponse>(
        name: "identity.userChanges", idempotent: true, callers: [.gateway])
}

extension IdentityAPI.Topic {
    /// Published for each committed change of a user, in `seq` order (`UserChange`).
    public static let userChanged = "user.changed"
    /// Published every `GATEHOUSE_CHANGE_FEED_HEARTBEAT_MS` (`ChangeFeedHeartbeat`).
    public static let changeFeedHeartbeat = "identity.heartbeat"
}
