import Foundation
import GatehouseSupport
import IdentityCore
import IdentityPorts
import Logging
import Mail
import PostgresNIO
import PostgresSupport
import Synchronization

/// The mail part of the identity store on PostgreSQL (issue 24): the outbox, password reset
/// codes and email action codes (verify, change, revert), with the SQLite store's tables,
/// CHECK constraints, outcomes and limits (`SQLiteUserStore+Outbox`, `+PasswordReset`,
/// `+EmailActions`). What PostgreSQL adds, because several instances share the database:
/// - the transactions that count a user's codes before adding one (the per-minute and per-hour
///   limits), and every transaction that voids or uses a user's codes, first lock the user's row
///   (`FOR UPDATE`), so two instances cannot both pass a limit or both use one code;
/// - the email reservation (SQLite's `email_reserved` triggers) checks under a transaction-level
///   advisory lock on the address, which a confirmation takes before it reserves the old one;
/// - each outbox row a worker reads is claimed for `outboxClaim` by its store instance, so the
///   workers of two instances do not both deliver it.
extension PostgresUserStore {
    /// The migrations of this part: SQLite's 0004 (outbox), 0006 (password resets), 0007 (email
    /// actions) and 0008 (email reservations), in PostgreSQL's terms.
    static let mailMigrations: [PostgresMigrator.Migration] = [
        // `message` is the `MailMessage` as JSON (its body blanked once sent or dead); `state`
        // `queued`, `sent` or `dead`. `claimed_by`/`claimed_until`: the store instance whose
        // worker read the row last, and until when no other instance's worker takes it.
        .init("0002-outbox", [
            """
            CREATE TABLE outbox (
                id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                message_id TEXT NOT NULL UNIQUE CHECK (length(message_id) BETWEEN 3 AND 256),
                kind TEXT NOT NULL CHECK (length(kind) BETWEEN 1 AND 64),
                recipient TEXT NOT NULL CHECK (octet_length(recipient) BETWEEN 3 AND 254),
                message TEXT NOT NULL CHECK (octet_length(message) <= 262144),
                state TEXT NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'sent', 'dead')),
                attempts BIGINT NOT NULL DEFAULT 0 CHECK (attempts >= 0),
                next_attempt_at BIGINT NOT NULL,
                created_at BIGINT NOT NULL,
                sent_at BIGINT,
                last_error TEXT CHECK (last_error IS NULL OR length(last_error) <= 512),
                claimed_by TEXT,
                claimed_until BIGINT
            )
            """,
            "CREATE INDEX outbox_due ON outbox(next_attempt_at) WHERE state = 'queued'",
        ]),
        // `used_at` is set when a code is used or voided by a newer one; rows go with their user.
        .init("0003-password-resets", [
            """
            CREATE TABLE password_resets (
                id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                code_hash BYTEA NOT NULL UNIQUE CHECK (octet_length(code_hash) = 32),
                expires_at BIGINT NOT NULL,
                used_at BIGINT,
                created_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX password_resets_user_id ON password_resets(user_id, created_at)",
        ]),
        // `email`/`email_normalized`: the address the code is about; `from_email_normalized` the
        // user's address when it was made; `previous_verified` the old address's state (revert).
        .init("0004-email-actions", [
            """
            CREATE TABLE email_actions (
                id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                purpose TEXT NOT NULL CHECK (purpose IN ('verify_email', 'change_email', 'revert_email')),
                user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                code_hash BYTEA NOT NULL UNIQUE CHECK (octet_length(code_hash) = 32),
                email TEXT NOT NULL,
                email_normalized TEXT NOT NULL,
                from_email_normalized TEXT,
                previous_verified BOOLEAN NOT NULL DEFAULT false,
                expires_at BIGINT NOT NULL,
                used_at BIGINT,
                created_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX email_actions_user ON email_actions(user_id, purpose, created_at)",
        ]),
        // An address named by an unused `revert_email` code stays its user's: no other user's row
        // may take it (insert, or an update that changes the address). The check runs under the
        // address's advisory lock (`reservationLock`), which a confirmation holds from before it
        // moves the user off the address until it commits the revert code, so a sign-up racing
        // the confirmation either meets the user's row (unique) or, after the lock, the code.
        // The error is a unique violation of `users_email_reserved`: `translate` says emailExists.
        .init("0005-email-reservations", [
            "CREATE INDEX email_actions_reserved ON email_actions(email_normalized) WHERE purpose = 'revert_email' AND used_at IS NULL",
            """
            CREATE FUNCTION users_email_reserved() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF NEW.email_normalized IS NOT NULL
                    AND (TG_OP = 'INSERT' OR NEW.email_normalized IS DISTINCT FROM OLD.email_normalized) THEN
                    PERFORM pg_advisory_xact_lock(\(reservationLockClass), hashtext(NEW.email_normalized));
                    IF EXISTS (
                        SELECT 1 FROM email_actions WHERE purpose = 'revert_email' AND used_at IS NULL
                        AND email_normalized = NEW.email_normalized AND user_id <> NEW.id) THEN
                        RAISE EXCEPTION 'email_reserved: users.email_normalized'
                            USING ERRCODE = 'unique_violation', CONSTRAINT = 'users_email_reserved';
                    END IF;
                END IF;
                RETURN NEW;
            END
            $$
            """,
            """
            CREATE TRIGGER users_email_reserved BEFORE INSERT OR UPDATE OF email_normalized ON users
            FOR EACH ROW EXECUTE FUNCTION users_email_reserved()
            """,
        ]),
    ]

    /// The first key of the email reservation's advisory locks (the second is the address's
    /// `hashtext`): a two-key lock, apart from the migrator's one-key locks.
    static let reservationLockClass: Int32 = 0x6D61_696C  // "mail"

    /// How long a worker's claim on the outbox rows it read keeps other instances' workers off
    /// them. Its own worker (this store instance) reads them again at once; another takes them
    /// after it (at least once, same Message-ID, as after a crash). Short, because the role runs
    /// one delivery pass at a time across instances anyway (`runIfLeader("outbox")`: the lead is
    /// held for the whole pass), so the claim only matters when an instance dies mid-pass: its
    /// mail waits this long, not longer, for the next leader.
    static let outboxClaim: Int64 = 2 * 60_000

    // MARK: Access

    /// Runs `query` on `connection` to its end (an error arrives after the rows) and returns its rows.
    @discardableResult
    static func mailRows(_ query: PostgresQuery, on connection: PostgresConnection, logger: Logger) async throws -> [PostgresRow] {
        try await connection.query(query, logger: logger).collect()
    }

    /// The one integer a `SELECT count(*)` (or another one-row, one-column query) gives.
    static func mailCount(_ query: PostgresQuery, on connection: PostgresConnection, logger: Logger) async throws -> Int {
        let count = try await mailRows(query, on: connection, logger: logger).first?.decode(Int64?.self) ?? nil
        return count.map(Int.init) ?? 0
    }

    /// `transaction`, then, when `body` queued a mail, wakes this process's outbox worker
    /// (`OutboxSignal`) once the transaction committed: SQLite's `enqueue` does it after commit.
    func mailTransaction<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection, OutboxWake) async throws -> T) async throws -> T {
        let wake = OutboxWake()
        let result = try await transaction { connection in try await body(connection, wake) }
        if wake.queued { OutboxSignal.shared.fire() }
        return result
    }

    /// Takes the email reservation's advisory lock on `normalized` until the transaction ends.
    static func reservationLock(_ normalized: String, on connection: PostgresConnection, logger: Logger) async throws {
        try await mailRows(
            "SELECT pg_advisory_xact_lock(\(reservationLockClass), hashtext(\(normalized)))", on: connection, logger: logger)
    }

    /// Locks the user's row (`FOR UPDATE`) until the transaction ends; whether there is one. The
    /// transactions that count, void or use a user's codes take it first, so they run one at a
    /// time per user whatever instance runs them.
    @discardableResult
    static func lockUser(_ id: UserID, on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        try await !mailRows("SELECT 1 FROM users WHERE id = \(id.rawValue) FOR UPDATE", on: connection, logger: logger).isEmpty
    }

    /// `updateUser` (the one write of a changed user) without a version to expect.
    static func updateLockedUser(
        id: UserID, now: Date, on connection: PostgresConnection, logger: Logger, _ change: (inout UserRecord) throws -> Void
    ) async throws -> UserRecord {
        try await updateUser(id: id, now: now, on: connection, logger: logger, change)
    }

    // MARK: Codes

    /// Deletes the one-time codes (password reset and email action rows) that expired or were
    /// used before `cutoff`, in one transaction; how many.
    @discardableResult
    public func purgeCodes(before cutoff: Date) async throws -> Int {
        try await transaction { connection in
            try await Self.purgeCodes(in: "password_resets", before: cutoff, on: connection, logger: self.queryLogger)
                + Self.purgeCodes(in: "email_actions", before: cutoff, on: connection, logger: self.queryLogger)
        }
    }

    /// Deletes the rows of `table` (`password_resets` or `email_actions`: a fixed name, never
    /// input) that expired or were used before `cutoff`; how many.
    static func purgeCodes(in table: StaticString, before cutoff: Date, on connection: PostgresConnection, logger: Logger) async throws -> Int {
        let ms = cutoff.millisecondsSince1970
        return try await mailCount(
            """
            WITH gone AS (DELETE FROM \(unescaped: "\(table)") WHERE expires_at < \(ms) OR (used_at IS NOT NULL AND used_at < \(ms)) RETURNING 1)
            SELECT count(*) FROM gone
            """, on: connection, logger: logger)
    }

    /// Whether `normalized` is another user's address, or reserved for another user by an unused
    /// revert code (in the caller's transaction).
    static func emailTakenOrReserved(_ normalized: String, userID: UserID, on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        try await !mailRows(
            """
            SELECT 1 FROM users WHERE email_normalized = \(normalized) AND id <> \(userID.rawValue)
            UNION ALL SELECT 1 FROM email_actions WHERE purpose = 'revert_email' AND used_at IS NULL
                AND email_normalized = \(normalized) AND user_id <> \(userID.rawValue)
            LIMIT 1
            """, on: connection, logger: logger
        ).isEmpty
    }
}

/// Whether a transaction queued a mail (`PostgresUserStore.mailTransaction` wakes the worker after it commits).
final class OutboxWake: Sendable {
    private let flag = Atomic<Bool>(false)

    /// Whether a mail was queued.
    var queued: Bool {
        get { flag.load(ordering: .relaxed) }
        set { flag.store(newValue, ordering: .relaxed) }
    }
}
